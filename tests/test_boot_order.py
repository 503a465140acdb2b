"""A GPU node boots its user data in the AMI's unit order: node-local weights appear, also after a reboot.

The model (components/offline/boot_order.py) rests on vendored upstream files; the first tests pin
what it reads from them, so an AMI bump that changes the order fails here. Then the rule: the shell
part main shipped until d181c05 (a wait inside cloud-final) is refused through the offline engine,
today's part boots cleanly twice, and each way of getting the order wrong is named.
"""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kimi_k3 import offline
from kimi_k3.capacity.node_group import nodeadm_user_data
from kimi_k3.core.formats import systemd_mount_unit
from kimi_k3.offline import boot_order, boot_scripts, systemd_units
from kimi_k3.offline.rules import ApplyTimeRuleError
from kimi_k3.weights import node_local
from tests.conftest import NOW, ROOT, fixture_for

DATA = ROOT / "components" / "data"

VENDORED = {
    # path under components/data: (upstream path, sha256)
    "amazon-eks-ami-v20251120/nodeadm-config.service": ("templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-config.service", "af7c1f6de23e439151f9534d45ddbf83cb1db6e2c8d5bac94cdaf0801e4fbe75"),
    "amazon-eks-ami-v20251120/nodeadm-run.service": ("templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-run.service", "b57d20cdd63d2e14e233507ce68a8560778a43eeaaa1119857888d50a218baee"),
    "amazon-eks-ami-v20251120/kubelet.service": ("templates/al2023/runtime/rootfs/etc/systemd/system/kubelet.service", "1a1fdcd97821123d1d729a073c746b52dcdd70d00a285ff06cbfdf05a6072707"),
    "amazon-eks-ami-v20251120/setup-local-disks": ("templates/shared/runtime/bin/setup-local-disks", "9ebb15a5cbe625e4a693b6019197b99eba1c9cf29f0fad9542b96ad340d5be7b"),
    "amazon-eks-ami-v20251120/init.go": ("nodeadm/cmd/nodeadm/init/init.go", "e96b9f98f60dfd3d352c852d4d2ab2ca9e3cf9ca3d5aff178e5ee6300b702941"),
    "amazon-eks-ami-v20251120/local_disk.go": ("nodeadm/internal/system/local_disk.go", "6ce82b58a3e45623567c57a4d315f7e3570ae64fdc39d4b3200ac3d0038529c8"),
    "amazon-eks-ami-v20251120/daemon.go": ("nodeadm/internal/kubelet/daemon.go", "9c7d4240a5a2076bfa30713889a9301fff0e094a21e7c65a3c6a74817359a1bf"),
    "amazon-eks-ami-v20251120/systemd.go": ("nodeadm/internal/daemon/systemd.go", "70fdc1ead924b419f3e82461c1d327403d43ffe7ffe2061f01cd57aad399cc9a"),
    "amazon-eks-ami-v20251120/install-nodeadm.sh": ("templates/al2023/provisioners/install-nodeadm.sh", "cbf586433c444b1db5e554a092596ea3261d8ca7da49e975dab336f76b84fda5"),
    "cloud-init-22.2.2/cloud-final.service.tmpl": ("systemd/cloud-final.service.tmpl", "b3799547bd468756126a418163dd0ea870c63d35fbebba6db22affe721543d22"),
    "cloud-init-22.2.2/cloud.cfg.tmpl": ("config/cloud.cfg.tmpl", "cf8052abdbef1b2cbb6a74789c665cfad186c398dc879a56b87517821de1311f"),
}

OLD_PART = """#!/bin/bash
set -euo pipefail
for i in $(seq 300); do mountpoint -q /mnt/k8s-disks/0 && break; sleep 1; done
mountpoint -q /mnt/k8s-disks/0
mkdir -p /mnt/k8s-disks/0/kimi-weights /mnt/kimi-local/weights
mountpoint -q /mnt/kimi-local/weights || mount --bind /mnt/k8s-disks/0/kimi-weights /mnt/kimi-local/weights
"""
"""``node_local.bind_mount_script()`` as main shipped it until d181c05."""


def _check(part: str, raid0: bool = True) -> boot_order.BootCheck:
    data = boot_order.parse_user_data(nodeadm_user_data((("text/x-shellscript", part),)))
    return boot_order.check_user_data(data if raid0 else boot_order.UserData(data.scripts, raid0=False))


# --- the vendored upstream files, and what the model reads from them ----------------------------------


@pytest.mark.parametrize("name", sorted(VENDORED))
def test_each_vendored_file_is_the_upstream_one_and_listed_with_its_provenance(name):
    upstream, digest = VENDORED[name]
    assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest
    readme = (DATA / "README.md").read_text()
    assert f"`{name}`" in readme and upstream in readme and digest in readme


def test_nodeadm_run_comes_after_cloud_final_and_the_kubelet_is_started_by_it():
    units = systemd_units.upstream_units()
    assert "cloud-final.service" in units["nodeadm-run.service"].after
    assert units["nodeadm-run.service"].exec_start == ("/usr/bin/nodeadm init --skip config --config-source imds://user-data --config-source file:///etc/eks/nodeadm.d/ --config-cache /run/eks/nodeadm/config.json",)
    enabled = re.search(r"systemctl enable \\\n((?:\s+\S+(?: \\)?\n)+)", systemd_units.vendored("amazon-eks-ami-v20251120/install-nodeadm.sh"))
    assert enabled and enabled[1].split() == ["nodeadm-boot-hook", "\\", "nodeadm-config", "\\", "nodeadm-run"]
    assert "kubelet" not in enabled[1]


def test_the_run_phase_sets_up_the_disks_then_starts_the_kubelet_and_waits_for_it():
    init = systemd_units.vendored("amazon-eks-ami-v20251120/init.go")
    run_phase = init[init.index("if !slices.Contains(c.skipPhases, runPhase)"):]
    assert run_phase.index("system.NewLocalDiskAspect()") < run_phase.index("c.runDaemons(log, nodeConfig, daemons)")
    assert 'exec.Command("setup-local-disks", args...)' in systemd_units.vendored("amazon-eks-ami-v20251120/local_disk.go")
    assert "return k.daemonManager.StartDaemon(KubeletDaemonName)" in systemd_units.vendored("amazon-eks-ami-v20251120/daemon.go")
    systemd = systemd_units.vendored("amazon-eks-ami-v20251120/systemd.go")
    start = systemd[systemd.index("func (m *systemdDaemonManager) StartDaemon"):]
    assert "return m.waitForStatus(context.TODO(), name, DaemonStatusRunning)" in start[: start.index("\n}\n")]


def test_setup_local_disks_mounts_the_array_at_the_modelled_path_with_an_enabled_unit():
    script = systemd_units.vendored("amazon-eks-ami-v20251120/setup-local-disks")
    assert 'MNT_DIR="/mnt/k8s-disks"' in script and 'local array_mount_point="${MNT_DIR}/0"' in script
    assert 'systemctl enable "${mount_unit_name}" --now' in script
    assert boot_order.RAID_MOUNT == node_local.RAID_MOUNT == "/mnt/k8s-disks/0"


def test_cloud_init_runs_shell_parts_in_cloud_final_once_per_instance():
    cfg = systemd_units.vendored("cloud-init-22.2.2/cloud.cfg.tmpl")
    final = cfg[cfg.index("cloud_final_modules:"):]
    assert " - scripts-user\n" in final
    unit = systemd_units.upstream_units()["cloud-final.service"]
    assert unit.exec_start == ("/usr/bin/cloud-init modules --mode=final",)
    assert "multi-user.target" not in unit.after, "the Ubuntu-only After=multi-user.target is not rendered for Amazon Linux"


def test_the_systemd_escape_of_our_mount_points_matches_systemd_escape():
    if not shutil.which("systemd-escape"):
        pytest.skip("systemd-escape is not installed")
    for path in (node_local.WEIGHTS_MOUNT, boot_order.RAID_MOUNT, "/mnt/a.b/c_d:e"):
        real = subprocess.run(["systemd-escape", "--path", "--suffix=mount", path], capture_output=True, text=True, check=True).stdout.strip()
        assert systemd_mount_unit(path) == real


# --- the rule --------------------------------------------------------------------------------------


def test_the_part_main_shipped_waits_inside_cloud_final_and_mounts_nothing():
    check = _check(OLD_PART)
    waits, fails = check.problems[:2]
    assert "line 3 waits for /mnt/k8s-disks/0 inside cloud-final.service and blocks the boot for 300 s" in waits
    assert "nodeadm-run.service: After=nodeadm-config.service cloud-final.service" in waits
    assert "line 4: /mnt/k8s-disks/0 is not mounted" in fails
    assert node_local.WEIGHTS_MOUNT not in check.first.mounted


def test_the_offline_engine_refuses_a_prod_plan_with_that_part(monkeypatch):
    monkeypatch.setattr(node_local, "boot_part", lambda: OLD_PART)
    with pytest.raises(ApplyTimeRuleError) as refused:
        offline.run_stack("prod", now=NOW, reservation=fixture_for)
    message = str(refused.value)
    assert re.search(r"aws:ec2/launchTemplate:LaunchTemplate '[\w-]+-gpu-lt': the node would not boot as planned", message)
    assert "inside cloud-final.service" in message


def test_todays_part_boots_twice_with_the_weights_mounted_before_the_kubelet():
    check = _check(node_local.boot_part())
    assert check.problems == ()
    for boot in (check.first, check.reboot):
        assert {boot_order.RAID_MOUNT, node_local.WEIGHTS_MOUNT} <= boot.kubelet_saw
    assert check.first.mounted_by[node_local.WEIGHTS_MOUNT] == node_local.WEIGHTS_MOUNT_UNIT
    assert check.reboot.mounted_by[node_local.WEIGHTS_MOUNT] == node_local.WEIGHTS_MOUNT_UNIT
    assert node_local.FIRST_BOOT_UNIT not in {e.unit for e in check.reboot.events}, "the first-boot unit does not run again"
    final = [e for e in check.first.events if e.unit == "cloud-final.service"]
    assert not any("waits" in e.text for e in final)


def test_the_prod_plan_ships_that_part_and_passes_the_rule(prod_plan):
    user_data = prod_plan.one("aws:ec2/launchTemplate:LaunchTemplate", "gpu-lt").plain_inputs["userData"]
    assert node_local.boot_part().rstrip("\n") in base64.b64decode(user_data).decode()
    assert boot_order.parse_user_data(user_data).raid0
    assert boot_order.check_user_data(user_data).problems == ()


def test_ordering_the_first_boot_unit_after_nodeadm_run_deadlocks():
    part = node_local.boot_part().replace("Before=kubelet.service\n[Service]", "After=nodeadm-run.service\nBefore=kubelet.service\n[Service]")
    (problem,) = _check(part).problems
    assert problem.startswith("boot deadlock: nodeadm-run.service waits for kubelet.service to start")
    assert "kimi-weights-volume.service: After=nodeadm-run.service" in problem and "kimi-weights-volume.service: Before=kubelet.service" in problem


def test_starting_the_unit_without_no_block_blocks_cloud_final():
    problems = _check(node_local.boot_part().replace("start --no-block", "start")).problems
    assert any("waits for kimi-weights-volume.service to start inside cloud-final.service and blocks the boot for 900 s" in p for p in problems)


def test_a_mount_unit_left_disabled_is_gone_after_a_reboot():
    part = node_local.boot_part().replace(f"systemctl enable '{node_local.WEIGHTS_MOUNT_UNIT}'\n", "")
    (problem,) = _check(part).problems
    assert problem.startswith(f"after a reboot {node_local.WEIGHTS_MOUNT} is not mounted again")


def test_a_one_off_mount_from_an_enabled_service_not_ordered_before_the_kubelet_is_late_after_a_reboot():
    part = """#!/bin/bash
set -euo pipefail
cat > /usr/local/sbin/bind <<'EOF'
#!/bin/bash
set -euo pipefail
until mountpoint -q /mnt/k8s-disks/0; do sleep 1; done
mkdir -p /mnt/k8s-disks/0/kimi-weights /mnt/kimi-local/weights
mount --bind /mnt/k8s-disks/0/kimi-weights /mnt/kimi-local/weights
EOF
cat > /etc/systemd/system/bind.service <<'EOF'
[Unit]
RequiresMountsFor=/mnt/k8s-disks/0
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/bind
[Install]
WantedBy=multi-user.target
EOF
systemctl enable bind.service
systemctl start --no-block bind.service
"""
    (problem,) = _check(part).problems
    assert problem.startswith("after a reboot bind.service, which mounts /mnt/kimi-local/weights, is not ordered before kubelet.service")
    assert _check(part.replace("[Unit]\n", "[Unit]\nBefore=kubelet.service\n")).problems == ()


def test_without_a_raid0_node_config_the_first_boot_unit_gives_up_and_fails():
    problems = _check(node_local.boot_part(), raid0=False).problems
    assert any(p.startswith("/usr/local/sbin/kimi-weights-volume, line 4: /mnt/k8s-disks/0 is not mounted") for p in problems)


def test_a_shell_part_that_writes_below_the_raid_before_it_exists_is_refused():
    part = "#!/bin/bash\nmkdir -p /mnt/k8s-disks/0/cache\n"
    (problem,) = _check(part).problems
    assert "uses /mnt/k8s-disks/0/cache, below /mnt/k8s-disks/0, which nodeadm-run.service mounts only after cloud-final.service" in problem


# --- the units are real systemd units ----------------------------------------------------------------


def test_systemd_analyze_verifies_the_units_the_part_installs(tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    files = boot_scripts.parse_script("part", node_local.boot_part()).files
    unit_dir = tmp_path / "units"
    unit_dir.mkdir()
    script = tmp_path / "kimi-weights-volume"
    script.write_text(files[node_local.FIRST_BOOT_SCRIPT])
    script.chmod(0o755)
    paths = []
    for path, body in files.items():
        if path.startswith("/etc/systemd/system/"):
            target = unit_dir / Path(path).name
            target.write_text(body.replace(f"ExecStart={node_local.FIRST_BOOT_SCRIPT}", f"ExecStart={script}"))
            paths.append(str(target))
    proc = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *paths], capture_output=True, text=True,
        env={"SYSTEMD_UNIT_PATH": f"{unit_dir}:", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    assert subprocess.run(["bash", "-n"], input=node_local.boot_part(), text=True).returncode == 0
    assert subprocess.run(["bash", "-n"], input=files[node_local.FIRST_BOOT_SCRIPT], text=True).returncode == 0

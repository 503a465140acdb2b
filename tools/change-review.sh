#!/usr/bin/env bash
# The change review of a pull request against its base branch, for every stack, as markdown on stdout.
#
#   tools/change-review.sh BASE_DIR [STACK...]      (CI: >> "$GITHUB_STEP_SUMMARY")
#
# BASE_DIR is a checkout of the base branch. For each stack (default: every stacks/Pulumi.*.yaml):
#   1. the base branch's own program plans it, from BASE_DIR (its code, its stack file):
#        kimi-k3 plan STACK --out $WORK/plan-base/STACK --now NOW
#   2. this checkout plans it as a later `pulumi up` of that plan and prints the change review:
#        kimi-k3 plan STACK --previous $WORK/plan-base/STACK --out $WORK/plan/change-review/STACK --now NOW
# Both at the same NOW, so the review shows what the code and the stack files change, not the clock
# (the rehearsed Capacity Block is the plan's default: scheduled; docs/change-review.md).
#   PYTHON                  the interpreter with kimi-k3 installed (default: .venv/bin/python)
#   KIMI_K3_REVIEW_NOW      the moment of both plans (default: now, UTC)
#   KIMI_K3_REVIEW_WORK     where the plans and logs go (default: build)
# A stack it cannot review (the base branch has no such stack yet, its plan fails) gets a line that
# says so; the script itself exits 0: the offline plan step before it is what fails a pull request.
set -uo pipefail
base="${1:?usage: change-review.sh BASE_DIR [STACK...]}"
shift
python="${PYTHON:-.venv/bin/python}"
python="$(cd "$(dirname "$python")" && pwd)/$(basename "$python")"  # absolute, symlinks kept: a venv's python is one
now="${KIMI_K3_REVIEW_NOW:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}"
work="$(realpath -m "${KIMI_K3_REVIEW_WORK:-build}")"
base="$(realpath "$base")"
stacks=("$@")
if [ "${#stacks[@]}" -eq 0 ]; then
  for file in stacks/Pulumi.*.yaml; do
    name="${file#stacks/Pulumi.}"
    stacks+=("${name%.yaml}")
  done
fi
mkdir -p "$work/logs"

echo "## Change review against the base branch"
echo
echo "Both plans offline at $now with the default rehearsal (a scheduled block): \`kimi-k3 plan STACK --previous DIR\` (docs/change-review.md)."
for stack in "${stacks[@]}"; do
  echo
  echo "### $stack"
  previous="$work/plan-base/$stack"
  log="$work/logs/$stack"
  # From BASE_DIR: python -m puts the current directory first on sys.path, so the base branch's kimi_k3 runs.
  if ! (cd "$base" && "$python" -m kimi_k3.cli plan "$stack" --out "$previous" --now "$now" --quiet) > "$log.base" 2>&1; then
    echo "The base branch's plan of $stack failed (a stack new in this pull request?): no review."
    echo '```'
    tail -n 5 "$log.base"
    echo '```'
    continue
  fi
  "$python" -m kimi_k3.cli plan "$stack" --previous "$previous" --out "$work/plan/change-review/$stack" --now "$now" --quiet > "$log" 2>&1
  status=$?
  echo '```'
  if grep -q '^Change review (' "$log"; then
    sed -n '/^Change review (/,$p' "$log"
  else
    tail -n 5 "$log"
  fi
  echo '```'
  if [ "$status" -ne 0 ]; then
    echo "\`kimi-k3 plan $stack --previous\` exited $status (1: a policy violation, or a change refused while a block serves; 2: an error)."
  fi
done
exit 0

"""Canned answers of the offline engine: what AWS would compute for a resource, and what data sources return.

Realistic shapes (ids with their AWS prefixes, ARNs of the offline account, an EKS
cluster's kubeconfig, an NLB hostname), derived from the inputs only, so two runs of
the same program give the same answers. Answers exist only for what the program asks:
an invoke without one fails loudly instead of returning something invented.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping

from pulumi.runtime import mocks as pulumi_mocks

from kimi_k3.offline.fixtures import ACCOUNT_ID, stable_hex, zone_id

# Default add-on versions the offline engine reports for aws.eks.get_addon_version.
# These stand in for `aws eks describe-addon-versions --kubernetes-version X`.
ADDON_VERSIONS = {
    "vpc-cni": "v1.20.4-eksbuild.1",
    "coredns": "v1.12.4-eksbuild.1",
    "kube-proxy": "v{k8s}.3-eksbuild.2",
    "eks-pod-identity-agent": "v1.3.9-eksbuild.3",
    "eks-node-monitoring-agent": "v1.4.1-eksbuild.1",
    # the HyperPod Inference Operator and its dependency add-ons (kimi_k3.hyperpod.inference_operator)
    "amazon-sagemaker-hyperpod-inference": "v1.0.0-eksbuild.1",
    "cert-manager": "v1.18.2-eksbuild.2",
    "aws-mountpoint-s3-csi-driver": "v1.14.1-eksbuild.1",
    "metrics-server": "v0.7.2-eksbuild.4",
}



def resource_id(args: pulumi_mocks.MockResourceArgs) -> str:
    """The id AWS or Kubernetes would give the resource: ``vpc-…`` style prefixes, names, ``namespace/name``."""
    prefixes = {
        "aws:ec2/vpc:Vpc": "vpc-", "aws:ec2/subnet:Subnet": "subnet-", "aws:ec2/internetGateway:InternetGateway": "igw-",
        "aws:ec2/natGateway:NatGateway": "nat-", "aws:ec2/eip:Eip": "eipalloc-", "aws:ec2/routeTable:RouteTable": "rtb-",
        "aws:ec2/securityGroup:SecurityGroup": "sg-", "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce-",
        "aws:ec2/launchTemplate:LaunchTemplate": "lt-", "aws:ec2/flowLog:FlowLog": "fl-",
    }
    prefix = prefixes.get(args.typ)
    if prefix:
        return prefix + stable_hex(f"{args.typ}:{args.name}", 17)
    if args.typ.startswith("aws:iam/role:") or args.typ.startswith("aws:cloudwatch/logGroup:"):
        return args.inputs.get("name") or auto_name(args)
    if args.typ.startswith("kubernetes:"):
        meta = args.inputs.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', args.name)}".lstrip("/")
    return str(uuid.UUID(hex=hashlib.md5(f"{args.typ}:{args.name}".encode()).hexdigest()))

def auto_name(args: pulumi_mocks.MockResourceArgs) -> str:
    """Pulumi's auto-name: the logical name plus a suffix (stable here, random in a real engine)."""
    return f"{args.name}-{stable_hex(args.name, 7)}"

def arn(region: str, service: str, resource: str) -> str:
    """An ARN of the offline account in ``region``."""
    return f"arn:aws:{service}:{region}:{ACCOUNT_ID}:{resource}"

def computed_outputs(args: pulumi_mocks.MockResourceArgs, region: str) -> dict:
    """The outputs AWS would compute for a resource (ARNs, ids, an EKS cluster's kubeconfig, an NLB hostname)."""
    t, inputs = args.typ, args.inputs
    name = inputs.get("name") or auto_name(args)
    if t == "eks:index:Cluster":
        return eks_cluster_outputs(args, region)
    if t == "aws:eks/nodeGroup:NodeGroup":
        ng_name = inputs.get("nodeGroupName") or auto_name(args)
        return {
            "nodeGroupName": ng_name,
            "arn": arn(region, "eks", f"nodegroup/{inputs.get('clusterName')}/{ng_name}/{uuid.uuid5(uuid.NAMESPACE_URL, ng_name)}"),
            "status": "ACTIVE",
            "resources": [{"autoscalingGroups": [{"name": f"eks-{ng_name}-{uuid.uuid5(uuid.NAMESPACE_DNS, ng_name)}"}], "remoteAccessSecurityGroupId": ""}],
        }
    if t == "aws:iam/role:Role":
        return {"name": name, "arn": f"arn:aws:iam::{ACCOUNT_ID}:role{inputs.get('path', '/')}{name}", "uniqueId": "AROA" + stable_hex(name, 17).upper()}
    if t == "aws:kms/key:Key":
        key_id = str(uuid.uuid5(uuid.NAMESPACE_OID, args.name))
        return {"keyId": key_id, "arn": arn(region, "kms", f"key/{key_id}")}
    if t == "aws:cloudwatch/logGroup:LogGroup":
        return {"name": name, "arn": arn(region, "logs", f"log-group:{name}")}
    if t == "aws:sns/topic:Topic":
        return {"name": name, "arn": arn(region, "sns", name)}
    if t == "aws:cloudwatch/eventRule:EventRule":
        return {"name": name, "arn": arn(region, "events", f"rule/{name}")}
    if t == "aws:ec2/launchTemplate:LaunchTemplate":
        return {"name": name, "latestVersion": 1, "defaultVersion": 1, "arn": arn(region, "ec2", f"launch-template/lt-{stable_hex(t + args.name, 17)}")}
    if t == "aws:ec2/vpc:Vpc":
        return {"arn": arn(region, "ec2", f"vpc/vpc-{stable_hex(t + args.name, 17)}"), "defaultSecurityGroupId": "sg-" + stable_hex(args.name + "sg", 17), "mainRouteTableId": "rtb-" + stable_hex(args.name + "rt", 17)}
    if t == "aws:ec2/eip:Eip":
        return {"publicIp": f"198.51.100.{int(stable_hex(args.name, 2), 16) % 250 + 1}", "allocationId": "eipalloc-" + stable_hex(t + args.name, 17)}
    if t == "aws:ec2/securityGroup:SecurityGroup":
        return {"arn": arn(region, "ec2", f"security-group/sg-{stable_hex(t + args.name, 17)}")}
    if t.startswith("aws:eks/addon:"):
        return {"arn": arn(region, "eks", f"addon/{inputs.get('clusterName')}/{inputs.get('addonName')}/{uuid.uuid5(uuid.NAMESPACE_URL, args.name)}")}
    if t.startswith("aws:eks/podIdentityAssociation:"):
        return {"associationId": "a-" + stable_hex(args.name, 17), "associationArn": arn(region, "eks", f"podidentityassociation/{inputs.get('clusterName')}/a-{stable_hex(args.name, 17)}")}
    if t.startswith("aws:s3/bucket:"):
        # With bucketPrefix, the provider appends a 26-character unique suffix (terraform id.PrefixedUniqueId).
        bucket = inputs.get("bucket") or (inputs["bucketPrefix"] + stable_hex(args.name, 26) if inputs.get("bucketPrefix") else auto_name(args))
        return {"bucket": bucket, "arn": f"arn:aws:s3:::{bucket}", "__id": bucket}
    if t == "aws-native:sagemaker:Cluster":
        return hyperpod_cluster_outputs(args, region)
    if t == "kubernetes:core/v1:Service" and (inputs.get("spec") or {}).get("type") == "LoadBalancer":
        meta = inputs.get("metadata") or {}
        scheme = ((meta.get("annotations") or {}).get("service.beta.kubernetes.io/aws-load-balancer-scheme", "internal"))
        host = f"k8s-{meta.get('namespace', 'default')[:8]}-{meta.get('name', args.name)[:8]}-{stable_hex(args.name, 10)}.elb.{region}.amazonaws.com"
        return {"status": {"loadBalancer": {"ingress": [{"hostname": ("internal-" if scheme == "internal" else "") + host}]}}}
    if t.startswith("aws:") and "arn" not in inputs:
        service = t.split(":")[1].split("/")[0]
        return {"arn": arn(region, service, f"{args.name}")}
    return {}

def hyperpod_cluster_outputs(args: pulumi_mocks.MockResourceArgs, region: str) -> dict:
    """What ``DescribeCluster`` answers for a created HyperPod cluster: its ARN (``cluster/`` and 12 characters) and InService.

    The Cloud Control identifier of ``AWS::SageMaker::Cluster`` is its ARN, so that is the id too.
    """
    cluster_arn = arn(region, "sagemaker", f"cluster/{stable_hex('sagemaker-cluster:' + args.name, 12)}")
    groups = [{**group, "currentCount": group.get("instanceCount", 0)} for group in args.inputs.get("instanceGroups") or []]
    return {"clusterArn": cluster_arn, "clusterStatus": "InService", "instanceGroups": groups, "__id": cluster_arn}


def eks_cluster_outputs(args: pulumi_mocks.MockResourceArgs, region: str) -> dict:
    """What the ``eks:index:Cluster`` remote component answers (its children are never created under mocks)."""
    name = args.inputs.get("name") or auto_name(args)
    endpoint = f"https://{stable_hex(name, 32).upper()}.gr7.{region}.eks.amazonaws.com"
    oidc_id = stable_hex(name + "oidc", 32).upper()
    issuer = f"oidc.eks.{region}.amazonaws.com/id/{oidc_id}"
    # As pulumi-eks generates it (nodejs/eks/cluster/cluster.ts, generateKubeconfig): with
    # providerCredentialOpts.roleArn the exec assumes that role (`--role`).
    token_args = ["--region", region, "eks", "get-token", "--cluster-name", name, "--output", "json"]
    role_arn = (args.inputs.get("providerCredentialOpts") or {}).get("roleArn")
    if role_arn:
        token_args += ["--role", role_arn]
    ca = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJkekNDQVIyZ0F3SUJBZ0lCQURBS0JnZ3Foa2pPUFFRREFqQWpNU0V3SHdZRFZRUURECk9rOW1abXhwYm1VdFpXNW5hVzVsTFhSbGMzUXRZMkV3SGhjTk1qWXdNVEF4TURBd01EQXdXaGNOTXpZd01UQXhNREF3TURBd1dqQWpNU0V3SHdZRFZRUURECi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": endpoint, "certificate-authority-data": ca}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "users": [{"name": name, "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws", "args": token_args}}}],
    }
    return {
        "kubeconfig": kubeconfig,
        "kubeconfigJson": json.dumps(kubeconfig),
        "clusterSecurityGroupId": "sg-" + stable_hex(name + "cluster", 17),
        "nodeSecurityGroupId": "sg-" + stable_hex(name + "node", 17),
        "oidcProviderArn": f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{issuer}",
        "oidcProviderUrl": f"https://{issuer}",
        "oidcIssuer": issuer,
        "clusterIngressRuleId": "sgr-" + stable_hex(name + "ingress", 17),
    }


def invoke_answer(token: str, args: dict, region: str, existing_subnet_azs: Mapping[str, str]) -> dict:
    """What a provider data source answers (AZs, caller identity, partition, region, add-on versions, subnets, VPCs).

    ``existing_subnet_azs`` places subnets of an existing VPC (``aws.ec2.get_subnet``).
    Raises :class:`NotImplementedError` for an invoke nothing here answers.
    """
    if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
        letters = "abcdef" if region == "us-east-1" else "abcd"
        names = [f"{region}{c}" for c in letters]
        return {"id": region, "names": names, "zoneIds": [zone_id(n) for n in names], "groupNames": [region] * len(names), "state": args.get("state")}
    if token == "aws:index/getCallerIdentity:getCallerIdentity":
        return {"accountId": ACCOUNT_ID, "arn": f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/offline/kimi-k3", "userId": "AROAOFFLINE:kimi-k3", "id": ACCOUNT_ID}
    if token == "aws:index/getPartition:getPartition":
        return {"id": "aws", "partition": "aws", "dnsSuffix": "amazonaws.com", "reverseDnsPrefix": "com.amazonaws"}
    if token == "aws:index/getRegion:getRegion":
        return {"id": region, "name": region, "region": region, "endpoint": f"ec2.{region}.amazonaws.com", "description": region}
    if token == "aws:eks/getAddonVersion:getAddonVersion":
        k8s = args.get("kubernetesVersion", "1.34")
        version = ADDON_VERSIONS.get(args.get("addonName", ""), "v1.0.0-eksbuild.1").format(k8s=k8s)
        return {"id": args.get("addonName"), "addonName": args.get("addonName"), "kubernetesVersion": k8s, "version": version, "mostRecent": args.get("mostRecent", False)}
    if token == "aws:ec2/getSubnet:getSubnet":
        subnet_id = args.get("id", "")
        return {"id": subnet_id, "availabilityZone": existing_subnet_azs.get(subnet_id, f"{region}a"), "vpcId": "vpc-" + stable_hex("existing", 17), "cidrBlock": "10.0.0.0/20"}
    if token == "aws:ec2/getVpc:getVpc":
        return {"id": args.get("id") or "vpc-" + stable_hex("existing", 17), "cidrBlock": "10.0.0.0/16", "arn": arn(region, "ec2", f"vpc/{args.get('id')}"), "state": "available", "enableDnsHostnames": True, "enableDnsSupport": True}
    raise NotImplementedError(f"the offline engine has no answer for invoke {token}; add one to components/offline/answers.py")

"""``kimi-k3 hyperpod STACK``: the stack's serving contract as a HyperPod ``InferenceEndpointConfig``.

Reads the stack file of the current Pulumi project (or ``--program DIR``) offline (no
AWS, no cluster), builds the same
serving contract the EKS path serves and prints (or writes) the YAML for
``kubectl apply -f`` on a SageMaker HyperPod cluster with the Inference Operator.
No secret value is ever written: the API key and the Hugging Face token are
referenced by the names of Kubernetes Secrets you create in the cluster.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from kimi_k3.cli.arguments import add_stack_arguments
from kimi_k3.errors import UserError
from kimi_k3.hyperpod.endpoint import DEFAULT_INSTANCE_TYPE, SECRET_KEY, render_inference_endpoint_config
from kimi_k3.stack import project
from kimi_k3.stack import settings as stack_settings


class _WithPlans(argparse.ArgumentParser):
    """The ``hyperpod`` parser: ``hyperpod STACK [flags]``, or ``hyperpod plans ACTION ...``.

    argparse cannot mix a positional STACK with optional subcommands, so ``plans`` is
    routed to its own parser (:mod:`kimi_k3.cli.hyperpod_plans`); a stack cannot be
    named ``plans``.
    """

    plans_parser: argparse.ArgumentParser

    def parse_known_args(self, args=None, namespace=None):
        """Hand ``plans ...`` to the training-plan parser, everything else to this one."""
        if args and args[0] == "plans":
            return self.plans_parser.parse_args(args[1:], namespace), []
        return super().parse_known_args(args, namespace)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``hyperpod`` subcommand (and its ``plans`` actions)."""
    parser = subparsers.add_parser(
        "hyperpod",
        help="render the stack's serving contract as a HyperPod InferenceEndpointConfig (YAML for kubectl apply)",
        description=(
            "Builds the serving contract of stack STACK of the current Pulumi project (image, pinned weights, vLLM flags) and renders it "
            "as an InferenceEndpointConfig for the SageMaker HyperPod Inference Operator. Prints the YAML, or writes it with --out. "
            "Training plans (the HyperPod capacity): `kimi-k3 hyperpod plans --help`."
        ),
    )
    from kimi_k3.cli import hyperpod_plans  # loaded by this command only: the others start without it

    parser.__class__ = _WithPlans
    parser.plans_parser = hyperpod_plans.build_parser(f"{parser.prog} plans")
    add_stack_arguments(parser)
    parser.add_argument("--out", type=Path, help="write the YAML to this file instead of standard output")
    parser.add_argument("--name", default="kimik3", help="metadata.name of the object (default: kimik3)")
    parser.add_argument("--namespace", default="default", help="namespace of the object (default: default)")
    parser.add_argument("--instance-type", help=f"HyperPod instance type (default: ml.<the stack's GPU instance type>, i.e. {DEFAULT_INSTANCE_TYPE})")
    parser.add_argument("--replicas", type=int, help="model pods, one node each (default: the stack's replicas, at least 1)")
    parser.add_argument(
        "--api-key-secret",
        help=f"existing Secret whose key '{SECRET_KEY}' holds the API key (default: NAME-api-key); the pod does not start without it",
    )
    parser.add_argument("--no-api-key", action="store_true", help="serve without an API key (anyone who reaches the endpoint can use it)")
    parser.add_argument("--hf-token-secret", help=f"existing Secret whose key '{SECRET_KEY}' holds a Hugging Face token (Hugging Face weights only)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Render the object and print or write it."""
    if args.no_api_key and args.api_key_secret:
        raise UserError("--no-api-key and --api-key-secret contradict each other; pass one")
    settings = stack_settings.load_settings(project.find_project(args.program, Path.cwd()), args.stack)
    api_key_secret = None if args.no_api_key else (args.api_key_secret or f"{args.name}-api-key")
    manifest = render_inference_endpoint_config(
        settings.serving.contract,
        name=args.name,
        namespace=args.namespace,
        instance_type=args.instance_type or f"ml.{settings.capacity.instance_type}",
        replicas=args.replicas if args.replicas is not None else max(1, settings.serving.replicas),
        api_key_secret=api_key_secret,
        hf_token_secret=args.hf_token_secret,
        s3_region=settings.region,
        routing=settings.serving.hyperpod_routing,
    )
    text = f"# kimi-k3 hyperpod {args.stack}: apply with `kubectl apply -f <this file>`\n" + yaml.safe_dump(manifest, sort_keys=False)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    except OSError as err:
        raise UserError(f"--out {args.out}: cannot write ({err.strerror})") from None
    print(f"wrote {args.out}", file=sys.stderr)
    if api_key_secret:
        print(
            f"create the API key Secret first: kubectl create secret generic {api_key_secret} -n {args.namespace} "
            f"--from-literal={SECRET_KEY}=\"$(openssl rand -hex 32)\"",
            file=sys.stderr,
        )
    print(f"then: kubectl apply -f {args.out}", file=sys.stderr)
    return 0

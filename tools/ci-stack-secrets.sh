#!/usr/bin/env bash
# Put a stack's secrets into its Pulumi config from CI secrets, before `pulumi preview` / `up`.
#
#   tools/ci-stack-secrets.sh STACK
#
# The committed stack files hold no secret (no provider could decrypt a committed
# placeholder); CI encrypts them with the stack's own secrets provider on the runner:
#   KIMI_K3_API_KEY             required: the key clients send (kimi-k3:apiKey)
#   KIMI_K3_HUGGING_FACE_TOKEN  optional: token for gated downloads (kimi-k3:huggingFaceToken)
#   PULUMI_BACKEND_URL          optional: self-managed backend (s3://…); unset = Pulumi Cloud
# Values go through stdin, never through the command line (`ps` and shell tracing show argv).
# Creates the stack when it does not exist yet (the first deploy), like `upsert`.
set -euo pipefail
stack="${1:?usage: ci-stack-secrets.sh STACK}"

if [ -n "${PULUMI_BACKEND_URL:-}" ]; then
  pulumi login --non-interactive "$PULUMI_BACKEND_URL"
else
  pulumi login --non-interactive
fi
pulumi stack select --non-interactive --create "$stack"

if [ -z "${KIMI_K3_API_KEY:-}" ]; then
  echo "::error::secret KIMI_K3_API_KEY is not set for stack $stack: add it to the GitHub environment's secrets" >&2
  exit 1
fi
printf '%s' "$KIMI_K3_API_KEY" | pulumi config set --non-interactive --secret kimi-k3:apiKey --stack "$stack"
if [ -n "${KIMI_K3_HUGGING_FACE_TOKEN:-}" ]; then
  printf '%s' "$KIMI_K3_HUGGING_FACE_TOKEN" | pulumi config set --non-interactive --secret kimi-k3:huggingFaceToken --stack "$stack"
fi
echo "stack $stack: secrets set from CI (kimi-k3:apiKey${KIMI_K3_HUGGING_FACE_TOKEN:+, kimi-k3:huggingFaceToken})"

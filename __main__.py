"""Kimi K3 on AWS — the Pulumi program: settings → platform → stack outputs."""

import pulumi

from kimi_k3.core import clock
from kimi_k3.stack import settings as stack_settings
from kimi_k3.stack.platform import Platform

settings = stack_settings.from_pulumi()
for warning in settings.warnings:
    pulumi.log.warn(warning)

# The one read of the clock: every component gets this moment as `now`.
platform = Platform("kimi-k3", settings, now=clock.program_now())
for name, value in platform.stack_outputs().items():
    pulumi.export(name, value)

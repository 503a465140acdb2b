"""Pulumi type tokens of the AWS resources the tests look for in a plan (``PlanResult.one(TOKEN)``).

Each token is ``aws:<module>/<camelName>:<Name>`` as pulumi-aws 7.51.1 registers it. Test
modules import the ones they need from here instead of spelling them again.
"""

from __future__ import annotations

METRIC_ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
SCHEDULER_SCHEDULE = "aws:scheduler/schedule:Schedule"
"""An EventBridge Scheduler schedule (not an Auto Scaling scheduled action, ``aws:autoscaling/schedule:Schedule``)."""
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
SG_INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
SG_EGRESS_RULE = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"

"""Alerts and a dashboard for the Kimi K3 serving stack (Prometheus Operator + Grafana).

* :mod:`.metrics` — the metric names the rules and panels read, each with its source;
* :mod:`.dcgm_counters` — the DCGM exporter counter list that also exports the ECC and
  throttling counters the alerts need (the chart's default list leaves them commented out);
* :mod:`.alerts` — a pure renderer of the ``PrometheusRule`` (block window and reserved
  count are inputs: they re-derive from the reservation after an extension);
* :mod:`.dashboard` — a pure renderer of the Grafana dashboard (grafana-foundation-sdk)
  and of the ConfigMap Grafana's sidecar loads.
"""

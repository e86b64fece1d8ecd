"""The probe receiver: engines' probes send cumulative snapshots over a unix socket or TCP (`listener`
accepts the connections, `connection` is one of them, `messages` handles what they send), the daemon
keeps bounded per-engine and per-schema state (`store`), lints the schema texts off the event loop
(`analysis`) and exposes the metric contract's families (`metric_families`, declared in
exporter.daemon.metrics_table; docs/metrics.md); exporter.daemon.collectors.probe wires them together
as one collector.

Empty on purpose: the child process that reads large messages (`message_check_worker`) imports this
package and should not load the daemon with it (46 MB and 0.4 s, against 14 MB).
"""

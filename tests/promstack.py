"""Prometheus and Alertmanager on loopback for the tests: the demo's own runners."""

from exporter.demo.stack import Alertmanager, Prometheus, Receiver, free_port

__all__ = ["Alertmanager", "Prometheus", "Receiver", "free_port"]

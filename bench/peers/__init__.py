"""Peer-side programs run as their own (pinned) processes by the benchmarks."""

"""Ports picked for servers started later lie outside the kernel's ephemeral range and are free."""

from __future__ import annotations

import random
import socket
from pathlib import Path

from evalsi import ports


def _ephemeral() -> tuple[int, int]:
    text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
    low, high = (int(part) for part in text.split())
    return low, high


def test_picked_ports_are_distinct_free_and_outside_the_ephemeral_range() -> None:
    low, high = _ephemeral()
    picked = ports.free_ports(50, rng=random.Random(7))
    assert len(set(picked)) == 50
    assert not any(low <= port <= high for port in picked)
    for port in picked:
        with socket.socket() as server:  # each binds as a server would
            server.bind(("0.0.0.0", port))


def test_a_taken_port_and_an_avoided_one_are_never_picked() -> None:
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken = ports.free_port()
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        assert not ports.port_free(taken)
        avoid = set(range(*ports.pick_range())) - {taken}
        avoid_one = sorted(avoid)[: len(avoid) // 2]
        picked = ports.free_ports(20, avoid=set(avoid_one), rng=random.Random(1))
    assert taken not in picked and not set(picked) & set(avoid_one)


def test_a_port_handed_out_is_not_handed_out_again_before_it_is_bound() -> None:
    # Two picks from the same sequence of random candidates: the second must skip what the first handed out,
    # though nothing has bound those ports yet (a stack's api ports, then its nats-server's).
    first = ports.free_ports(5, rng=random.Random(11))
    second = ports.free_ports(5, rng=random.Random(11))
    assert all(ports.port_free(port) for port in first)  # still unbound, yet
    assert not set(first) & set(second)

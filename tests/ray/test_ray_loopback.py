"""A Ray the tests start stays on loopback: its node, its GCS and every socket its processes listen on
(the switch is set in tests/conftest.py before Ray is imported)."""
from __future__ import annotations

import ipaddress

import pytest

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")


def _is_loopback(host: str) -> bool:
    ip = ipaddress.ip_address(host.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _listening(pids: set[int]) -> set[str]:
    """The local hosts of the TCP sockets these processes listen on."""
    hosts = set()
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids and conn.laddr:
            hosts.add(conn.laddr.ip)
    return hosts


@pytest.mark.timeout(120)
def test_a_local_ray_started_by_the_tests_listens_on_loopback_only(own_ray):
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)   # own_ray shuts it down

    @ray.remote(num_cpus=0)
    def where() -> str:
        return ray.util.get_node_ip_address()

    assert ray.get(where.remote()) == "127.0.0.1"                  # a worker process's node
    gcs_host = ray.get_runtime_context().gcs_address.rsplit(":", 1)[0]
    assert _is_loopback(gcs_host), gcs_host
    assert [_is_loopback(n["NodeManagerAddress"]) for n in ray.nodes()] == [True]
    ours = {p.pid for p in psutil.Process().children(recursive=True)}   # GCS, raylet, workers, ...
    hosts = _listening(ours)
    assert hosts, "found no listening socket of Ray's processes (the check would pass vacuously)"
    assert all(_is_loopback(h) for h in hosts), f"Ray listens beyond loopback: {sorted(hosts)}"

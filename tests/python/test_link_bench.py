#!/usr/bin/python3
"""test_link_bench.py — bench/store/link_bench.py's parts that need no root:
the rates it accepts, and the names and addresses it gives a shaped link
(link-local /30s that stay inside 169.254.1.0-169.254.254.255, never one
an interface already has). The link itself runs in test_bench (the tiny
run's link suite)."""
import ipaddress
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "bench", "store"))
import link_bench as lb  # noqa: E402


class Rates(unittest.TestCase):
    def test_good(self):
        self.assertEqual(lb.parse_rates("1g,10g,500m,2.5g"),
                         [("1g", 10**9), ("10g", 10**10), ("500m", 5 * 10**8), ("2.5g", 25 * 10**8)])
        self.assertEqual(lb.parse_rates(" 1G "), [("1g", 10**9)])

    def test_bad(self):
        for bad in ("3x", "0m", "0.5m", "200g", "", "1g,", "g", "-1g", "1e9"):
            with self.assertRaises(lb.LinkError, msg=bad) as cm:
                lb.parse_rates(bad)
            self.assertTrue(str(cm.exception))


class Args(unittest.TestCase):
    """Bad arguments: a one-line usage error (exit 2) before anything is set up."""

    def run_bench(self, *args):
        import subprocess
        return subprocess.run([sys.executable, os.path.join(here, "..", "..", "bench", "store", "link_bench.py")]
                              + list(args), capture_output=True, text=True, timeout=60)

    def test_bad(self):
        for args in ([], ["--resume", "0"], ["--resume", "x"], ["--rates", "3x", "--resume", "1"]):
            p = self.run_bench(*args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn("error:", p.stderr)


class Names(unittest.TestCase):
    LINK_LOCAL = ipaddress.ip_network("169.254.0.0/16")

    def check(self, pid, used=""):
        ns, dev, peer, client, server = lb.names_for(pid, used)
        a, b = ipaddress.ip_address(client), ipaddress.ip_address(server)
        net = ipaddress.ip_network(client + "/30", strict=False)
        self.assertIn(a, self.LINK_LOCAL)
        self.assertTrue(1 <= int(client.split(".")[2]) <= 254, client)
        self.assertEqual(net, ipaddress.ip_network(server + "/30", strict=False))
        self.assertNotIn(a, (net.network_address, net.broadcast_address))
        self.assertNotIn(b, (net.network_address, net.broadcast_address))
        self.assertNotEqual(a, b)
        for name in (dev, peer):  # IFNAMSIZ: 15 characters and the NUL
            self.assertLessEqual(len(name), 15, name)
        self.assertEqual(ns, "rckpt-link-%d" % pid)
        return client

    def test_every_pid_gets_a_valid_pair(self):
        # the pid picks the start: every start, and pids past a wrap
        for pid in list(range(0, 254 * 62 + 70)) + [32767, 99999, 4194304]:
            self.check(pid)

    def test_skips_a_taken_third_octet(self):
        c = self.check(1234)
        used = "5: rkl1a    inet %s/30 scope global rkl1a" % c
        c2 = self.check(1234, used)
        self.assertNotEqual(c.split(".")[2], c2.split(".")[2])

    def test_all_taken(self):
        used = "".join(" 169.254.%d.1/30\n" % c for c in range(1, 255))
        with self.assertRaises(lb.LinkError):
            lb.names_for(7, used)


if __name__ == "__main__":
    unittest.main()

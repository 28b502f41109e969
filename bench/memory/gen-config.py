#!/usr/bin/env python3
"""Writes the config `loadtest --endpoints N --tenant-size S` gives its engine (same tables,
same shape; loopback addresses instead of live gateways), for measuring the config load
alone: `health-orchestrator check-config --config OUT`.

usage: gen-config.py N OUT [TENANT_SIZE=100] [INTERVAL_MS=30000]
"""
import sys

n, out = int(sys.argv[1]), sys.argv[2]
size = int(sys.argv[3]) if len(sys.argv) > 3 else 100
interval = int(sys.argv[4]) if len(sys.argv) > 4 else 30000
timeout, fast = max(1, min(interval // 2, 1000)), max(1, min(interval // 10, 100))
secret = out + ".secret"
with open(secret, "w") as f:
    f.write("load-test-secret\n")
with open(out, "w") as f:
    f.write(
        '[api]\nlisten = "127.0.0.1:0"\n\n[telemetry]\nlog_format = "json"\n\n'
        f'[defaults]\nstartup_grace = "{interval * 5}ms"\n\n'
        f'[defaults.check]\nkind = "http"\npath = "/healthz"\ninterval = "{interval}ms"\n'
        f'timeout = "{timeout}ms"\nfast_interval = "{fast}ms"\nrise = 1\nfall = 2\n\n'
    )
    for i in range(n):
        ip = f"127.{1 + i // 65536}.{i // 256 % 256}.{i % 256}"
        f.write(f'\n[[endpoints]]\nname = "e{i}"\naddress = "{ip}"\ncheck = {{ port = 18080 }}\n')
    f.write("\n")
    for k, start in enumerate(range(0, n, size)):
        names = ", ".join(f'"e{i}"' for i in range(start, min(start + size, n)))
        f.write(
            f'[[tenants]]\nname = "t{k}"\ndomains = ["t{k}.load.test"]\nendpoints = [{names}]\n'
            'sinks = ["loadtest_recorder"]\n\n'
        )
    f.write(
        '[sinks.loadtest_recorder]\nkind = "webhook"\nurl = "http://127.0.0.1:9/"\n'
        f'secret_file = "{secret}"\n'
        "delivery = { max_writes_per_second = 100000, burst = 10000 }\n"
    )

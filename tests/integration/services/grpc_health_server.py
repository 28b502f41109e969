"""A real gRPC server with grpcio's own health service (grpc.health.v1), for the grpc
check tests. Usage: grpc_health_server.py HOST [CERT KEY]. Prints `ready PORT` once serving on an
ephemeral port; then each stdin line `SERVICE STATUS` (SERVING, NOT_SERVING, UNKNOWN) sets a
service's status and is answered with `ok`. Exits when stdin closes."""

import sys
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

host = sys.argv[1]
server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
servicer = health.HealthServicer()
health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
servicer.set("", health_pb2.HealthCheckResponse.SERVING)
servicer.set("api", health_pb2.HealthCheckResponse.SERVING)
servicer.set("down", health_pb2.HealthCheckResponse.NOT_SERVING)
if len(sys.argv) == 4:
    with open(sys.argv[2], "rb") as cert, open(sys.argv[3], "rb") as key:
        credentials = grpc.ssl_server_credentials([(key.read(), cert.read())])
    port = server.add_secure_port(f"{host}:0", credentials)
else:
    port = server.add_insecure_port(f"{host}:0")
server.start()
print("ready", port, flush=True)
for line in sys.stdin:
    service, status = line.split()
    servicer.set(service, getattr(health_pb2.HealthCheckResponse, status))
    print("ok", flush=True)
server.stop(0)

"""A real gRPC server with grpcio's own health service (grpc.health.v1), for the grpc
check tests. Usage: grpc_health_server.py HOST [CERT KEY]. Prints `ready PORT` once serving on an
ephemeral port; then each stdin line `SERVICE STATUS` (SERVING, NOT_SERVING, UNKNOWN) sets a
service's status and is answered with `ok`, and `peers` is answered with the number of distinct
client connections (peer addresses) that called Check so far. Exits when stdin closes."""

import sys
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc



class CountingHealth(health.HealthServicer):
    """The reference health service, remembering which connections called it."""

    def __init__(self):
        super().__init__()
        self.peers = set()

    def Check(self, request, context):
        self.peers.add(context.peer())
        return super().Check(request, context)


host = sys.argv[1]
server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
servicer = CountingHealth()
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
    if line.strip() == "peers":
        print(len(servicer.peers), flush=True)
        continue
    service, status = line.split()
    servicer.set(service, getattr(health_pb2.HealthCheckResponse, status))
    print("ok", flush=True)
server.stop(0)

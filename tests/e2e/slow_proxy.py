"""A loopback TCP proxy that forwards the server's bytes to the client at a
limited rate: a client that reads its responses slowly (a slow network, a
busy host), while its own frames (flow-control updates) pass at once."""
import socket
import threading
import time


class SlowProxy:
    """Listens on a free loopback port (`port`) and forwards each
    connection to 127.0.0.1:`upstream_port`, server-to-client at
    `bytes_per_second`. `resets` counts connections the server reset."""

    CHUNK = 16384

    def __init__(self, upstream_port, bytes_per_second):
        self.upstream_port = upstream_port
        self.rate = bytes_per_second
        self.resets = 0
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(8)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self._listener.close()

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(("127.0.0.1", self.upstream_port))
            # Small buffers, so that what the proxy has not forwarded yet stays
            # with the server's socket (as on a slow link), not in the proxy.
            for s in (client, server):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            threading.Thread(target=self._pump, args=(client, server, None), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, self.rate),
                             daemon=True).start()

    def _pump(self, src, dst, rate):
        try:
            while True:
                data = src.recv(self.CHUNK)
                if not data:
                    break
                dst.sendall(data)
                if rate:
                    time.sleep(len(data) / rate)
        except ConnectionResetError:
            self.resets += 1
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)  # pass the end of the stream on
        except OSError:
            pass

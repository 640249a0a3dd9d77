"""The network below full-access: the egress proxy (the only way out), its
strict HTTP/1 reader, listening sockets made inside a sandbox's network
namespace for the proxy to accept on from the host's, and, for the hosts a
credential is bound to, TLS terminated with the attempt's CA, the real key
swapped in and each model call read on the wire.
"""

/*
 * The egress's in-kernel splice (src/proxy/ksplice.c, docs/egress-proxy.md).
 *
 * Both sockets of a CONNECT tunnel go into `socks` (a SOCKHASH keyed by each
 * socket's cookie) and `peers` (cookie -> the other socket's cookie and the
 * bytes redirected so far). The stream verdict program runs on every socket
 * of `socks` when bytes arrive and sends them out of the peer socket
 * (bpf_sk_redirect_hash, flags 0: the peer's egress). When the peer cannot
 * take them yet, the kernel keeps them queued on the peer (its psock) and
 * the source socket's receive memory stays charged, so a slow reader slows
 * the sender down (TCP's window) instead of losing bytes.
 *
 * A socket whose peer is not in `socks` (only possible in the few
 * microseconds between the two inserts) keeps its bytes (SK_PASS) and counts
 * them in `passed`: the relay then ends the tunnel rather than deliver them
 * out of order.
 */
#include <linux/bpf.h>

#include <bpf/bpf_helpers.h>

#ifndef KSPLICE_SOCKETS
#define KSPLICE_SOCKETS 65536
#endif

struct ksplice_peer {
    __u64 peer;   /* the other socket's cookie */
    __u64 bytes;  /* bytes received on this socket and redirected to the peer */
    __u64 passed; /* bytes kept on this socket: the peer was not in socks */
};

struct {
    __uint(type, BPF_MAP_TYPE_SOCKHASH);
    __uint(max_entries, KSPLICE_SOCKETS);
    __type(key, __u64);
    __type(value, __u32);
} socks SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, KSPLICE_SOCKETS);
    __type(key, __u64);
    __type(value, struct ksplice_peer);
} peers SEC(".maps");

SEC("sk_skb/stream_verdict")
int egress_verdict(struct __sk_buff *skb)
{
    __u64 cookie = bpf_get_socket_cookie(skb);
    struct ksplice_peer *p = bpf_map_lookup_elem(&peers, &cookie);
    if (!p)
        return SK_PASS;
    __u32 len = skb->len;
    /* A bare FIN reaches the verdict as an empty skb: redirected, the
     * peer's send of 0 bytes counts as a broken pipe (EPIPE on the peer).
     * The relay passes the end on itself (shutdown), once the bytes are out. */
    if (len == 0)
        return SK_DROP;
    /* The bytes arrive as page fragments of the skbs TCP received, and
     * leave as the same fragments: a receiver on loopback (a browser, a
     * local server) is charged the fragments' whole pages against their
     * few bytes and keeps its window small (the sending socket was limited
     * by it 95% of its busy time). One copy into a linear buffer here lets
     * its window grow. Failure leaves the skb as it was. */
    bpf_skb_pull_data(skb, len);
    long v = bpf_sk_redirect_hash(skb, &socks, &p->peer, 0);
    if (v == SK_PASS) {
        __sync_fetch_and_add(&p->bytes, len);
        return SK_PASS;
    }
    __sync_fetch_and_add(&p->passed, len);
    return SK_PASS;
}

char LICENSE[] SEC("license") = "GPL";

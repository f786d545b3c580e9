/*
 * The probe of bench/skmsg_probe.c (docs/egress-proxy.md, "sk_msg: measured,
 * not built"): a browser-side socket's sends redirected in the kernel to the
 * egress's upstream socket, so that a tunnel's upload never reaches the
 * egress at all.
 *
 * `probe_ops` (sock_ops, attached to a cgroup v2) puts every socket that
 * connects to the probe's listener port into `socks`, keyed by (its port <<
 * 16 | the listener's port). The probe puts its upstream socket there too
 * and names it in `route`; `probe_msg` (sk_msg, attached to `socks`) then
 * sends what a routed socket writes out of the upstream socket
 * (bpf_msg_redirect_hash, flags 0: the target's egress, synchronously in
 * the writer's send).
 *
 * A route with `fallback` set lets the bytes take the writer's own
 * connection (SK_PASS, relayed by the probe) while the probe marks the
 * upstream socket `congested`, and goes back to redirecting only once the
 * relay has written into the upstream socket every byte that went that way
 * (`relayed`, published by the probe, against the writer's own write_seq
 * counted from the switch) and the mark is gone. A redirect is synchronous,
 * so every redirected byte is in the upstream socket before the writer's
 * next send starts: the order holds both ways.
 */
#include <linux/bpf.h>

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

/* The one field of the kernel's tcp_sock read (CO-RE, relocated against
 * the running kernel's BTF). */
struct tcp_sock___probe {
    __u32 write_seq;
} __attribute__((preserve_access_index));

struct probe_route {
    __u32 target;   /* the upstream socket's key in socks */
    __u32 fallback; /* 1: take the writer's connection while congested */
    __u32 passing;  /* the writer's bytes take its own connection */
    __u32 base_seq; /* the writer's write_seq when passing began */
    __u64 passed;   /* bytes passed in earlier episodes */
    __u64 redirects, passes, switches;
};

struct {
    __uint(type, BPF_MAP_TYPE_SOCKHASH);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, __u32);
} socks SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, struct probe_route);
} route SEC(".maps");

/* route key -> bytes the relay has written into the upstream socket. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, __u64);
} relayed SEC(".maps");

/* upstream key -> 1 while the probe finds its send queue half full. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, __u32);
} congested SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u32);
} listen_port SEC(".maps");

SEC("sockops")
int probe_ops(struct bpf_sock_ops *skops)
{
    if (skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB)
        return 1;
    __u32 zero = 0;
    __u32 *lp = bpf_map_lookup_elem(&listen_port, &zero);
    __u32 rport = bpf_ntohl(skops->remote_port);
    if (!lp || *lp != rport)
        return 1;
    __u32 key = (skops->local_port << 16) | rport;
    bpf_sock_hash_update(skops, &socks, &key, BPF_ANY);
    return 1;
}

SEC("sk_msg")
int probe_msg(struct sk_msg_md *m)
{
    __u32 key = (m->local_port << 16) | bpf_ntohl(m->remote_port);
    struct probe_route *r = bpf_map_lookup_elem(&route, &key);
    if (!r)
        return SK_PASS;
    __u32 target = r->target;
    if (r->fallback) {
        struct bpf_sock *me = m->sk;
        if (!me)
            return SK_PASS;
        struct tcp_sock___probe *tp = (struct tcp_sock___probe *)bpf_skc_to_tcp_sock(me);
        if (!tp)
            return SK_PASS;
        __u32 seq = BPF_CORE_READ(tp, write_seq);
        __u32 *cong = bpf_map_lookup_elem(&congested, &target);
        int full = cong && *cong;
        if (r->passing) {
            __u64 passed = r->passed + (__u32)(seq - r->base_seq);
            __u64 *rel = bpf_map_lookup_elem(&relayed, &key);
            if (full || !rel || *rel != passed) {
                r->passes++;
                return SK_PASS;
            }
            r->passed = passed;
            r->passing = 0;
        } else if (full) {
            r->passing = 1;
            r->base_seq = seq;
            r->switches++;
            r->passes++;
            return SK_PASS;
        }
    }
    r->redirects++;
    return bpf_msg_redirect_hash(m, &socks, &target, 0);
}

char LICENSE[] SEC("license") = "GPL";

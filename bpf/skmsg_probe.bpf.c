/*
 * The probe of bench/skmsg_probe.c (docs/egress-proxy.md, "sk_msg: measured,
 * not built"): a browser-side socket's sends redirected in the kernel to the
 * egress's upstream socket, so that a tunnel's upload never reaches the
 * egress at all.
 *
 * `ops` (sock_ops, attached to a cgroup v2) puts every socket that connects
 * to the probe's listener port into `socks`, keyed by (its port << 16 |
 * the listener's port). The probe puts its upstream socket there too and
 * names it in `route`; `msg` (sk_msg, attached to `socks`) then sends what a
 * routed socket writes out of the upstream socket (bpf_msg_redirect_hash,
 * flags 0: the target's egress, synchronously in the writer's send).
 */
#include <linux/bpf.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

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
    __type(value, __u32);
} route SEC(".maps");

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
    __u32 *to = bpf_map_lookup_elem(&route, &key);
    if (!to)
        return SK_PASS;
    __u32 target = *to;
    return bpf_msg_redirect_hash(m, &socks, &target, 0);
}

char LICENSE[] SEC("license") = "GPL";

// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * Slipstream's tc datapath (clsact, cls_bpf direct-action) for the LAN interfaces.
 *
 * For every TCP packet of a flow the daemon put in `flows` (a background flow whose handshake it
 * classed), the program
 *   1. reports the packet's IP and TCP headers (no payload) and the kernel time to the daemon
 *      (`events`, a ring buffer): the engine in user space measures from them, as it does from
 *      NFQUEUE;
 *   2. lowers the window of the receiver's ACKs to the target the daemon wrote in `flows`, with
 *      the same safety rules as crates/engine/src/window_clamp.rs (never raise the host's window,
 *      never move the right edge left, at least two segments, window-scale rounding up), and
 *      patches the TCP checksum incrementally (RFC 1624) with bpf_l4_csum_replace.
 *
 * Anything unexpected (not Ethernet/IP/TCP, fragments, IPv6 extension headers, a full ring
 * buffer, no daemon heartbeat) passes unmodified. Every path returns PASS (TC_ACT_UNSPEC, which
 * TCX calls TCX_NEXT): "no verdict", so the filters and TCX programs after this one still run,
 * such as sqm-scripts' ingress redirect to its IFB. TC_ACT_OK would end the classification
 * there: in cls_bpf's direct-action mode any verdict but TC_ACT_UNSPEC stops the filter chain
 * (cls_bpf_classify), and under TCX TCX_PASS skips the classic clsact/ingress filters after the
 * TCX programs (sch_handle_ingress/egress in net/core/dev.c, 6.6+).
 *
 * Handshakes (SYN, SYN-ACK) are not handled here: they still go through the firewall's
 * classification and NFQUEUE, where the daemon learns the flow's rule, window scales and MSS.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

/* Bytes of each packet reported, from its IP header: IPv6 (40) + the largest TCP header (60)
 * fit, with room for IPv4 options. Keep in sync with HEAD_BYTES in src/event.rs. */
#define HEAD_BYTES 128
#define MAX_SCALE 14
/* The verdict of every path: let the next filter decide (see the top of the file). */
#define PASS TC_ACT_UNSPEC

/* One direction of a flow: addresses and ports as the packet carries them. IPv4 addresses
 * use the first word of each address. */
struct flow_key {
	__u8 family; /* 4 or 6 */
	__u8 pad[3];
	__u32 saddr[4];
	__u32 daddr[4];
	__u16 sport; /* network order */
	__u16 dport; /* network order */
};

/* What the daemon wants for packets travelling in one direction of a flow. */
struct flow_cfg {
	/* Window the engine wants for this direction's ACKs, bytes; 0: do not lower. */
	__u32 target_bytes;
	/* The other side's (the data sender's) MSS: the floor is two of them. */
	__u32 mss;
	/* Window-scale shift of the host sending in this direction (RFC 7323). */
	__u8 scale;
	/* FLOW_CLAMP: lower ACK windows; FLOW_HOLD: household hold (no two-segment floor);
	 * FLOW_SENT_EDGE: sent_edge holds the right edge of a window update the daemon sent. */
	__u8 flags;
	/* The rule number the flow was classed with (for the daemon's reports). */
	__u16 rule;
	/* The right edge the daemon's own window update advertised in this direction (household
	 * time-sharing): counts as advertised, so no later ACK goes left of it. The daemon clears
	 * it once `edges` has caught up with it. */
	__u32 sent_edge;
};
#define FLOW_CLAMP 1
#define FLOW_HOLD 2
#define FLOW_SENT_EDGE 4

/* skb->mark of the frames the daemon sends itself (window updates to LAN hosts, on a packet
 * socket with SO_MARK): passed untouched and unreported, so the engine does not take them for
 * the host's ACKs. Keep in sync with OWN_MARK in src/maps.rs. */
#define OWN_MARK 0x536c7053 /* "SlpS" */

/* The furthest right edge advertised in one direction; written by this program only, with
 * compare-and-swap (bpf_spin_lock is not allowed in LRU maps): bit 32 says the edge is known,
 * the low 32 bits are the edge. */
struct flow_edge {
	__u64 word;
};
#define EDGE_KNOWN (1ULL << 32)
/* Compare-and-swap attempts before an ACK passes unmodified (another CPU kept moving the edge). */
#define EDGE_TRIES 4

/* The report of one packet. Keep in sync with src/event.rs. */
struct event {
	__u64 ktime_ns;   /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u32 ifindex;
	__u16 rule;       /* flow_cfg.rule */
	__u8 egress;      /* 0: entered from the LAN (sent by a LAN host), 1: leaving to the LAN */
	__u8 head_len;    /* bytes of head[] filled */
	__u8 head[HEAD_BYTES];
};

/* Daemon liveness: the daemon moves `alive_until_ns` forward every tick; past it, the program
 * passes everything untouched (a hung or killed daemon leaves no clamp behind). */
struct control {
	__u64 alive_until_ns;
};

enum counter {
	C_EVENTS,
	C_RINGBUF_FULL,
	C_REWRITTEN,
	C_NO_DAEMON,
	C_EDGE_LOST,
	C_STALE_FORGOTTEN,
	C_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192); /* set from limits.max_flows (two directions each) at load */
	__type(key, struct flow_key);
	__type(value, struct flow_cfg);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct flow_key);
	__type(value, struct flow_edge);
} edges SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22); /* 4 MiB: ~27k reports; set at load */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct control);
} control SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&counters, &which);
	if (n)
		*n += 1;
}

/* Drops both directions of a flow (entries and right edges). */
static __always_inline void forget(struct flow_key *key)
{
	struct flow_key back = *key;
	back.saddr[0] = key->daddr[0];
	back.saddr[1] = key->daddr[1];
	back.saddr[2] = key->daddr[2];
	back.saddr[3] = key->daddr[3];
	back.daddr[0] = key->saddr[0];
	back.daddr[1] = key->saddr[1];
	back.daddr[2] = key->saddr[2];
	back.daddr[3] = key->saddr[3];
	back.sport = key->dport;
	back.dport = key->sport;
	bpf_map_delete_elem(&flows, key);
	bpf_map_delete_elem(&flows, &back);
	bpf_map_delete_elem(&edges, key);
	bpf_map_delete_elem(&edges, &back);
	count(C_STALE_FORGOTTEN);
}

/* a - b as a signed distance in sequence space (RFC 1982). */
static __always_inline __s32 seq_diff(__u32 a, __u32 b)
{
	return (__s32)(a - b);
}

/*
 * The window field to forward, as crates/engine/src/window_clamp.rs `clamp_window`:
 * wanted = max(target, edge - ack, 2 * mss (not when held)); a field never above the host's,
 * rounded up to the scale unit.
 */
static __always_inline __u16 clamp_field(__u16 host_field, __u8 scale, __u32 ack, __u32 edge,
					 int have_edge, __u32 target, __u32 mss, int hold)
{
	__u64 host_bytes = (__u64)host_field << scale;
	__u64 edge_floor = 0;
	if (have_edge) {
		__s32 d = seq_diff(edge, ack);
		edge_floor = d > 0 ? (__u64)d : 0;
	}
	__u64 segments = hold ? 0 : 2 * (__u64)mss;
	__u64 floor = edge_floor > segments ? edge_floor : segments;
	__u64 wanted = (__u64)target > floor ? (__u64)target : floor;
	if (wanted >= host_bytes)
		return host_field;
	__u64 unit = 1ULL << scale;
	__u64 field = (wanted + unit - 1) >> scale;
	return field < host_field ? (__u16)field : host_field;
}

static __always_inline int handle(struct __sk_buff *skb, __u8 egress)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct flow_key key = {};
	__u32 l3 = sizeof(struct ethhdr), l4, ip_len;
	struct tcphdr *tcp;

	if ((void *)(eth + 1) > data_end || skb->mark == OWN_MARK)
		return PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end || ip->protocol != IPPROTO_TCP || ip->ihl < 5)
			return PASS;
		/* Fragments (offset or more-fragments set) pass. */
		if (ip->frag_off & bpf_htons(0x3fff))
			return PASS;
		key.family = 4;
		key.saddr[0] = ip->saddr;
		key.daddr[0] = ip->daddr;
		l4 = l3 + ip->ihl * 4;
		ip_len = bpf_ntohs(ip->tot_len);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end || ip6->nexthdr != IPPROTO_TCP)
			return PASS;
		key.family = 6;
		__builtin_memcpy(key.saddr, &ip6->saddr, 16);
		__builtin_memcpy(key.daddr, &ip6->daddr, 16);
		l4 = l3 + sizeof(struct ipv6hdr);
		ip_len = sizeof(struct ipv6hdr) + bpf_ntohs(ip6->payload_len);
	} else {
		return PASS;
	}
	if (l4 > 100)
		return PASS;
	tcp = data + l4;
	if ((void *)(tcp + 1) > data_end || tcp->doff < 5)
		return PASS;
	key.sport = tcp->source;
	key.dport = tcp->dest;

	struct flow_cfg *cfg = bpf_map_lookup_elem(&flows, &key);
	if (!cfg)
		return PASS;
	/* The handshake reaches the daemon through NFQUEUE. A LAN host's opening SYN meets this
	 * program before netfilter (tc ingress comes first), so an entry found for it belongs to
	 * an earlier connection on the same ports: forgotten, so that a new connection the
	 * firewall does not class inherits no clamp (a classed one is put back by the daemon,
	 * from NFQUEUE, before the SYN's verdict). */
	if (tcp->syn) {
		if (!egress && !tcp->ack)
			forget(&key);
		return PASS;
	}
	__u32 zero = 0;
	struct control *ctl = bpf_map_lookup_elem(&control, &zero);
	__u64 now = bpf_ktime_get_ns();
	/* Without a fresh heartbeat nothing is reported or lowered, but the right edge each ACK
	 * advertises is still recorded: a clamp resumed later must not move it left. */
	int alive = ctl && ctl->alive_until_ns >= now;

	__u16 host_field = bpf_ntohs(tcp->window);
	__u32 ack = bpf_ntohl(tcp->ack_seq);
	int is_ack = tcp->ack;
	__u32 csum_off = l4 + offsetof(struct tcphdr, check);
	__u32 win_off = l4 + offsetof(struct tcphdr, window);

	/* 1. Report the packet as it came (the engine needs the host's window). */
	struct event *ev = alive ? bpf_ringbuf_reserve(&events, sizeof(*ev), 0) : NULL;
	if (!alive) {
		count(C_NO_DAEMON);
	} else if (ev) {
		__u32 avail = skb->len - l3;
		__u32 n = avail < HEAD_BYTES ? avail : HEAD_BYTES;
		/* A data segment's IP and TCP headers are all the engine reads of it: its payload is
		 * not copied (a pure ACK, headers only, is copied whole as before). */
		__u32 headers = l4 - l3 + tcp->doff * 4;
		if (ip_len < n)
			n = ip_len;
		if (headers < n)
			n = headers;
		ev->ktime_ns = now;
		ev->ifindex = skb->ifindex;
		ev->rule = cfg->rule;
		ev->egress = egress;
		if (n >= 40 && n <= HEAD_BYTES &&
		    bpf_skb_load_bytes(skb, l3, ev->head, n) == 0) {
			ev->head_len = n;
			/* Default wakeup: only when the daemon has read everything before this
			 * report, so a daemon working through a backlog is not woken. */
			bpf_ringbuf_submit(ev, 0);
			count(C_EVENTS);
		} else {
			bpf_ringbuf_discard(ev, 0);
		}
	} else {
		count(C_RINGBUF_FULL);
	}

	/* 2. The receiver's ACKs: track the right edge, lower the window. */
	if (!is_ack || tcp->rst)
		return PASS;
	struct flow_edge *e = bpf_map_lookup_elem(&edges, &key);
	if (!e) {
		struct flow_edge fresh = {};
		bpf_map_update_elem(&edges, &key, &fresh, BPF_NOEXIST);
		e = bpf_map_lookup_elem(&edges, &key);
		if (!e)
			return PASS;
	}
	__u8 scale = cfg->scale > MAX_SCALE ? MAX_SCALE : cfg->scale;
	__u16 field = host_field;
	int stored = 0;
	for (int i = 0; i < EDGE_TRIES; i++) {
		__u64 seen = e->word;
		int known = (seen & EDGE_KNOWN) != 0;
		__u32 edge = (__u32)seen;
		/* The edge of the daemon's own window update counts as advertised. */
		if ((cfg->flags & FLOW_SENT_EDGE) && (!known || seq_diff(cfg->sent_edge, edge) > 0)) {
			edge = cfg->sent_edge;
			known = 1;
		}
		field = host_field;
		if (alive && (cfg->flags & FLOW_CLAMP))
			field = clamp_field(host_field, scale, ack, edge, known, cfg->target_bytes,
					    cfg->mss, cfg->flags & FLOW_HOLD);
		__u32 new_edge = ack + ((__u32)field << scale);
		/* Keep the furthest edge (the sent one, folded in, lets the daemon forget it). */
		if (known && seq_diff(new_edge, edge) < 0)
			new_edge = edge;
		if ((seen & EDGE_KNOWN) && seq_diff(new_edge, (__u32)seen) <= 0) {
			stored = 1;
			break;
		}
		if (__sync_val_compare_and_swap(&e->word, seen, EDGE_KNOWN | new_edge) == seen) {
			stored = 1;
			break;
		}
	}
	if (!stored) {
		count(C_EDGE_LOST);
		return PASS;
	}
	if (field >= host_field)
		return PASS;

	__u16 old_be = bpf_htons(host_field), new_be = bpf_htons(field);
	/* RFC 1624 incremental update of the TCP checksum; under CHECKSUM_PARTIAL the helper leaves
	 * the field (it holds only the pseudo-header sum, the device sums the new window). */
	if (bpf_l4_csum_replace(skb, csum_off, old_be, new_be, 2) < 0)
		return PASS;
	if (bpf_skb_store_bytes(skb, win_off, &new_be, 2, 0) < 0)
		return PASS;
	count(C_REWRITTEN);
	return PASS;
}

SEC("classifier")
int slipstream_ingress(struct __sk_buff *skb)
{
	return handle(skb, 0);
}

SEC("classifier")
int slipstream_egress(struct __sk_buff *skb)
{
	return handle(skb, 1);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

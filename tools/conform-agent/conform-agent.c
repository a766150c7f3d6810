/*
 * conform-agent: the peer side of `roce conform` on libibverbs (rdma_rxe, or any RoCE NIC).
 *
 * It listens on TCP (default port 7471, every address of the host) and serves the line
 * protocol of PROTOCOL.md beside this file: a tester creates QPs, memory regions and work
 * requests here, aims crafted RoCE packets at them, and reads back completions, QP states and
 * memory. Each connection is a session with its own protection domain; whatever a session
 * created is destroyed when it ends, however it ends. Malformed requests get an ERR reply and
 * never crash the agent; every length and count is bounded.
 *
 * Build: make -C tools/conform-agent (needs libibverbs-dev). Run: conform-agent [-p PORT]
 * [-d DEVICE] [-o] [-v].
 *
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define VERSION 1
#define DEFAULT_PORT 7471
#define MAX_LINE (16 * 1024)
#define MAX_MR_LEN (1u << 20)
#define MAX_IO_LEN 4096u
#define MAX_OBJECTS 64
#define MAX_POLL 64u
#define MAX_POLL_MS 10000u
#define MAX_SESSIONS 8
#define MAX_ARGS 32
#define PORT_NUM 1

static struct ibv_context *ctx;
static const char *dev_name;
static int verbose;
/* -o: exit once the first session has ended */
static int once;
static int sessions_ended;

static void say(const char *fmt, ...)
{
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "conform-agent: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- sessions and the objects they own ---- */

struct mr_entry {
	uint32_t handle;
	struct ibv_mr *mr;
	void *buf;
	uint32_t len;
};

struct qp_entry {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
};

struct session {
	int fd;
	char in[MAX_LINE + 2];
	size_t in_len;
	struct ibv_pd *pd;
	struct mr_entry mrs[MAX_OBJECTS];
	struct qp_entry qps[MAX_OBJECTS];
	struct ibv_ah *ahs[MAX_OBJECTS];
	/* a poll_cq waiting for its first completion */
	int waiting;
	uint32_t wait_qpn;
	uint32_t wait_max;
	uint64_t wait_until;
};

static struct session *sessions[MAX_SESSIONS];
static uint32_t next_mr_handle = 1;

static void session_free(struct session *s)
{
	int i;

	for (i = 0; i < MAX_OBJECTS; i++) {
		if (s->qps[i].qp)
			ibv_destroy_qp(s->qps[i].qp);
		if (s->qps[i].cq)
			ibv_destroy_cq(s->qps[i].cq);
	}
	for (i = 0; i < MAX_OBJECTS; i++)
		if (s->ahs[i])
			ibv_destroy_ah(s->ahs[i]);
	for (i = 0; i < MAX_OBJECTS; i++) {
		if (s->mrs[i].mr)
			ibv_dereg_mr(s->mrs[i].mr);
		free(s->mrs[i].buf);
	}
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	close(s->fd);
	free(s);
}

static struct mr_entry *find_mr(struct session *s, uint64_t handle)
{
	int i;

	for (i = 0; i < MAX_OBJECTS; i++)
		if (s->mrs[i].mr && s->mrs[i].handle == handle)
			return &s->mrs[i];
	return NULL;
}

static struct qp_entry *find_qp(struct session *s, uint64_t qpn)
{
	int i;

	for (i = 0; i < MAX_OBJECTS; i++)
		if (s->qps[i].qp && s->qps[i].qp->qp_num == qpn)
			return &s->qps[i];
	return NULL;
}

/* ---- replies ---- */

struct reply {
	char buf[MAX_LINE + 64];
	size_t len;
	int err;
};

static void put(struct reply *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (r->len >= sizeof(r->buf))
		return;
	va_start(ap, fmt);
	n = vsnprintf(r->buf + r->len, sizeof(r->buf) - r->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		r->len += (size_t)n < sizeof(r->buf) - r->len ? (size_t)n : sizeof(r->buf) - r->len - 1;
}

static int fail(struct reply *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	r->len = 0;
	r->err = 1;
	put(r, "ERR ");
	va_start(ap, fmt);
	n = vsnprintf(r->buf + r->len, sizeof(r->buf) - r->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		r->len += (size_t)n < sizeof(r->buf) - r->len ? (size_t)n : sizeof(r->buf) - r->len - 1;
	return -1;
}

/* ---- request parsing: a verb, then key=value words, each key at most once ---- */

struct args {
	const char *verb;
	int n;
	char *key[MAX_ARGS];
	char *val[MAX_ARGS];
	int used[MAX_ARGS];
};

static int split(char *line, struct args *a, struct reply *r)
{
	char *save = NULL, *w;
	int i;

	memset(a, 0, sizeof(*a));
	a->verb = strtok_r(line, " ", &save);
	if (!a->verb)
		return fail(r, "empty line");
	while ((w = strtok_r(NULL, " ", &save))) {
		char *eq = strchr(w, '=');

		if (!eq)
			return fail(r, "\"%.40s\" is not key=value", w);
		if (a->n == MAX_ARGS)
			return fail(r, "more than %d arguments", MAX_ARGS);
		*eq = 0;
		for (i = 0; i < a->n; i++)
			if (!strcmp(a->key[i], w))
				return fail(r, "%.40s given twice", w);
		a->key[a->n] = w;
		a->val[a->n] = eq + 1;
		a->n++;
	}
	return 0;
}

static const char *get(struct args *a, const char *key)
{
	int i;

	for (i = 0; i < a->n; i++)
		if (!strcmp(a->key[i], key)) {
			a->used[i] = 1;
			return a->val[i];
		}
	return NULL;
}

static int parse_u64(const char *v, uint64_t *out)
{
	char *end;
	int base = 10;

	if (!*v || *v == '-' || *v == '+' || *v == ' ')
		return -1;
	if (v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
		base = 16;
		v += 2;
		if (!*v)
			return -1;
	}
	errno = 0;
	*out = strtoull(v, &end, base);
	return errno || *end ? -1 : 0;
}

/* A number no larger than `max`; `def` when absent and not required. */
static int num(struct args *a, const char *key, uint64_t max, int required, uint64_t def,
	       uint64_t *out, struct reply *r)
{
	const char *v = get(a, key);

	if (!v) {
		if (required)
			return fail(r, "%s: %s= missing", a->verb, key);
		*out = def;
		return 0;
	}
	if (parse_u64(v, out))
		return fail(r, "%s=%.40s is not a number", key, v);
	if (*out > max)
		return fail(r, "%s=%.40s is out of range", key, v);
	return 0;
}

static int finish(struct args *a, struct reply *r)
{
	int i;

	for (i = 0; i < a->n; i++)
		if (!a->used[i])
			return fail(r, "%s: unknown key %.40s", a->verb, a->key[i]);
	return 0;
}

/* The value `name` stands for in `table` (names[i] <-> values[i]), -1 if none. */
static int pick(const char *name, const char *const *names, const int *values, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(name, names[i]))
			return values[i];
	return -1;
}

/* The QP `qpn=` names, which must be this session's. */
static struct qp_entry *qp_arg(struct session *s, struct args *a, uint64_t *qpn, struct reply *r)
{
	struct qp_entry *e;

	if (num(a, "qpn", 0xffffff, 1, 0, qpn, r))
		return NULL;
	e = find_qp(s, *qpn);
	if (!e)
		fail(r, "no QP %" PRIu64 " in this session", *qpn);
	return e;
}

static int parse_access(const char *v, int *out, struct reply *r)
{
	static const struct {
		const char *name;
		int flag;
	} names[] = {
		{ "local_write", IBV_ACCESS_LOCAL_WRITE },
		{ "remote_write", IBV_ACCESS_REMOTE_WRITE },
		{ "remote_read", IBV_ACCESS_REMOTE_READ },
		{ "remote_atomic", IBV_ACCESS_REMOTE_ATOMIC },
	};
	char copy[128], *save = NULL, *w;
	unsigned i;

	*out = 0;
	if (!strcmp(v, "none"))
		return 0;
	if (!strcmp(v, "all")) {
		*out = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;
		return 0;
	}
	if (!*v)
		return fail(r, "access= is empty (none, all, or flags joined by commas)");
	if (strlen(v) >= sizeof(copy))
		return fail(r, "access=%.40s is too long", v);
	strcpy(copy, v);
	if (copy[0] == ',' || copy[strlen(copy) - 1] == ',' || strstr(copy, ",,"))
		return fail(r, "access=%.40s has an empty flag", v);
	for (w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (!strcmp(w, names[i].name))
				break;
		if (i == sizeof(names) / sizeof(names[0]))
			return fail(r, "access flag \"%.40s\" is not one of local_write, remote_write, "
				    "remote_read, remote_atomic", w);
		*out |= names[i].flag;
	}
	return 0;
}

/* The GID of a peer address: IPv4-mapped for IPv4 (RoCEv2). */
static int addr_gid(const char *v, union ibv_gid *gid, int *v4, struct reply *r)
{
	struct in_addr a4;
	struct in6_addr a6;

	memset(gid, 0, sizeof(*gid));
	if (inet_pton(AF_INET, v, &a4) == 1) {
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		memcpy(&gid->raw[12], &a4, 4);
		*v4 = 1;
		return 0;
	}
	if (inet_pton(AF_INET6, v, &a6) == 1) {
		memcpy(gid->raw, &a6, 16);
		*v4 = 0;
		return 0;
	}
	return fail(r, "dest=%.60s is not an IP address", v);
}

/* The local GID index for RoCEv2 towards an IPv4 (mapped) or IPv6 peer. */
static int sgid_index(int v4, struct reply *r)
{
	struct ibv_port_attr port;
	int i;

	if (ibv_query_port(ctx, PORT_NUM, &port))
		return fail(r, "ibv_query_port: %s", strerror(errno));
	for (i = 0; i < port.gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		const uint8_t *g;
		int mapped;

		if (ibv_query_gid_ex(ctx, PORT_NUM, i, &e, 0))
			continue;
		if (e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		g = e.gid.raw;
		mapped = !g[0] && !g[1] && !g[2] && !g[3] && !g[4] && !g[5] && !g[6] && !g[7] &&
			 !g[8] && !g[9] && g[10] == 0xff && g[11] == 0xff;
		if (v4 && mapped)
			return i;
		if (!v4 && !mapped && !(g[0] == 0xfe && (g[1] & 0xc0) == 0x80))
			return i;
	}
	return fail(r, "no RoCEv2 GID for an %s peer on port %d", v4 ? "IPv4" : "IPv6", PORT_NUM);
}

static const char *state_name(enum ibv_qp_state s)
{
	switch (s) {
	case IBV_QPS_RESET: return "RESET";
	case IBV_QPS_INIT: return "INIT";
	case IBV_QPS_RTR: return "RTR";
	case IBV_QPS_RTS: return "RTS";
	case IBV_QPS_SQD: return "SQD";
	case IBV_QPS_SQE: return "SQE";
	case IBV_QPS_ERR: return "ERR";
	default: return "UNKNOWN";
	}
}

static const char *status_name(enum ibv_wc_status s)
{
	static const char *names[] = {
		"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR",
		"WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR",
		"REM_ACCESS_ERR", "REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR",
		"LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR", "INV_EECN_ERR",
		"INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR",
	};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "GENERAL_ERR";
}

static const char *opcode_name(enum ibv_wc_opcode o)
{
	switch (o) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	default: return "UNKNOWN";
	}
}

/* ---- the requests ---- */

static int do_reg_mr(struct session *s, struct args *a, struct reply *r)
{
	uint64_t len, fill;
	const char *acc;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_ATOMIC;
	struct mr_entry *e = NULL;
	int i;

	if (num(a, "len", MAX_MR_LEN, 1, 0, &len, r) || num(a, "fill", 255, 0, 0, &fill, r))
		return -1;
	acc = get(a, "access");
	if (acc && parse_access(acc, &access, r))
		return -1;
	if (finish(a, r))
		return -1;
	if (len == 0)
		return fail(r, "len=0: a region needs at least one byte");
	for (i = 0; i < MAX_OBJECTS && !e; i++)
		if (!s->mrs[i].mr)
			e = &s->mrs[i];
	if (!e)
		return fail(r, "at most %d memory regions", MAX_OBJECTS);
	free(e->buf);
	e->buf = NULL;
	if (posix_memalign(&e->buf, 4096, len))
		return fail(r, "out of memory for %" PRIu64 " bytes", len);
	memset(e->buf, (int)fill, len);
	e->mr = ibv_reg_mr(s->pd, e->buf, len, access);
	if (!e->mr) {
		free(e->buf);
		e->buf = NULL;
		return fail(r, "ibv_reg_mr: %s", strerror(errno));
	}
	e->len = (uint32_t)len;
	e->handle = next_mr_handle++;
	if (!next_mr_handle)
		next_mr_handle = 1;
	put(r, "OK mr=%" PRIu32 " addr=0x%" PRIxPTR " lkey=0x%" PRIx32 " rkey=0x%" PRIx32,
	    e->handle, (uintptr_t)e->buf, e->mr->lkey, e->mr->rkey);
	return 0;
}

static int do_dereg_mr(struct session *s, struct args *a, struct reply *r)
{
	uint64_t h;
	struct mr_entry *e;

	if (num(a, "mr", UINT32_MAX, 1, 0, &h, r) || finish(a, r))
		return -1;
	e = find_mr(s, h);
	if (!e)
		return fail(r, "no memory region %" PRIu64 " in this session", h);
	if (ibv_dereg_mr(e->mr))
		return fail(r, "ibv_dereg_mr: %s", strerror(errno));
	free(e->buf);
	memset(e, 0, sizeof(*e));
	put(r, "OK");
	return 0;
}

/* The region `mr=` and the range `off=`, `len`, checked to lie inside it. */
static struct mr_entry *region(struct session *s, struct args *a, uint64_t len, uint64_t *off,
			       struct reply *r)
{
	uint64_t h;
	struct mr_entry *e;

	if (num(a, "mr", UINT32_MAX, 1, 0, &h, r) || num(a, "off", UINT32_MAX, 0, 0, off, r))
		return NULL;
	e = find_mr(s, h);
	if (!e) {
		fail(r, "no memory region %" PRIu64 " in this session", h);
		return NULL;
	}
	if (*off + len > e->len) {
		fail(r, "bytes %" PRIu64 "..%" PRIu64 " are outside the %" PRIu32 "-byte region",
		     *off, *off + len, e->len);
		return NULL;
	}
	return e;
}

static int do_read_mr(struct session *s, struct args *a, struct reply *r)
{
	uint64_t len, off, i;
	struct mr_entry *e;

	if (num(a, "len", MAX_IO_LEN, 1, 0, &len, r))
		return -1;
	e = region(s, a, len, &off, r);
	if (!e || finish(a, r))
		return -1;
	put(r, "OK data=");
	for (i = 0; i < len; i++)
		put(r, "%02x", ((uint8_t *)e->buf)[off + i]);
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int do_write_mr(struct session *s, struct args *a, struct reply *r)
{
	const char *hex = get(a, "data");
	uint64_t off, len, i;
	struct mr_entry *e;

	if (!hex)
		return fail(r, "write_mr: data= missing");
	len = strlen(hex);
	if (len % 2)
		return fail(r, "data= has an odd number of hex digits");
	len /= 2;
	if (len > MAX_IO_LEN)
		return fail(r, "data length=%" PRIu64 " is above the limit %u", len, MAX_IO_LEN);
	for (i = 0; i < 2 * len; i++)
		if (hexval(hex[i]) < 0)
			return fail(r, "data= holds a character that is not a hex digit");
	e = region(s, a, len, &off, r);
	if (!e || finish(a, r))
		return -1;
	for (i = 0; i < len; i++)
		((uint8_t *)e->buf)[off + i] = (uint8_t)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
	put(r, "OK");
	return 0;
}

static int do_create_qp(struct session *s, struct args *a, struct reply *r)
{
	static const char *const types[] = { "rc", "uc", "ud" };
	static const int type_values[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	const char *type = get(a, "type");
	int qpt;
	uint64_t send_wr, recv_wr;
	struct ibv_qp_init_attr init;
	struct qp_entry *e = NULL;
	int i;

	if (!type)
		return fail(r, "create_qp: type= missing");
	if (num(a, "send_wr", 1024, 0, 64, &send_wr, r) || num(a, "recv_wr", 1024, 0, 64, &recv_wr, r) ||
	    finish(a, r))
		return -1;
	memset(&init, 0, sizeof(init));
	qpt = pick(type, types, type_values, 3);
	if (qpt < 0)
		return fail(r, "QP type \"%.20s\" is not one of rc, uc, ud", type);
	init.qp_type = (enum ibv_qp_type)qpt;
	for (i = 0; i < MAX_OBJECTS && !e; i++)
		if (!s->qps[i].qp)
			e = &s->qps[i];
	if (!e)
		return fail(r, "at most %d QPs", MAX_OBJECTS);
	e->cq = ibv_create_cq(ctx, (int)(send_wr + recv_wr + 16), NULL, NULL, 0);
	if (!e->cq)
		return fail(r, "ibv_create_cq: %s", strerror(errno));
	init.send_cq = e->cq;
	init.recv_cq = e->cq;
	init.cap.max_send_wr = send_wr ? (uint32_t)send_wr : 1;
	init.cap.max_recv_wr = recv_wr ? (uint32_t)recv_wr : 1;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	e->qp = ibv_create_qp(s->pd, &init);
	if (!e->qp) {
		int err = errno;

		ibv_destroy_cq(e->cq);
		e->cq = NULL;
		return fail(r, "ibv_create_qp: %s", strerror(err));
	}
	put(r, "OK qpn=%" PRIu32, e->qp->qp_num);
	return 0;
}

static int do_connect_qp(struct session *s, struct args *a, struct reply *r)
{
	uint64_t qpn, dest_qpn, rq_psn, sq_psn, mtu, mrd, mdrd, timeout, retry, rnr, minrnr, qkey;
	uint64_t tclass, hop_limit;
	const char *dest = get(a, "dest"), *acc = get(a, "access");
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_qp_attr attr;
	struct qp_entry *e;
	union ibv_gid gid;
	enum ibv_mtu ibmtu;
	int v4, sgid, mask;

	e = qp_arg(s, a, &qpn, r);
	if (!e || num(a, "dest_qpn", 0xffffff, 0, 0, &dest_qpn, r) ||
	    num(a, "rq_psn", 0xffffff, 0, 0, &rq_psn, r) ||
	    num(a, "sq_psn", 0xffffff, 0, 0, &sq_psn, r) ||
	    num(a, "mtu", 4096, 0, 1024, &mtu, r) ||
	    num(a, "max_rd_atomic", 255, 0, 1, &mrd, r) ||
	    num(a, "max_dest_rd_atomic", 255, 0, 1, &mdrd, r) ||
	    num(a, "timeout", 31, 0, 14, &timeout, r) || num(a, "retry_cnt", 7, 0, 7, &retry, r) ||
	    num(a, "rnr_retry", 7, 0, 7, &rnr, r) || num(a, "min_rnr_timer", 31, 0, 12, &minrnr, r) ||
	    num(a, "qkey", UINT32_MAX, 0, 0x11111111, &qkey, r) ||
	    num(a, "traffic_class", 255, 0, 0, &tclass, r) ||
	    num(a, "hop_limit", 255, 0, 64, &hop_limit, r))
		return -1;
	if (!dest)
		return fail(r, "connect_qp: dest= missing");
	if (acc && parse_access(acc, &access, r))
		return -1;
	if (finish(a, r) || addr_gid(dest, &gid, &v4, r))
		return -1;
	switch (mtu) {
	case 256: ibmtu = IBV_MTU_256; break;
	case 512: ibmtu = IBV_MTU_512; break;
	case 1024: ibmtu = IBV_MTU_1024; break;
	case 2048: ibmtu = IBV_MTU_2048; break;
	case 4096: ibmtu = IBV_MTU_4096; break;
	default: return fail(r, "mtu=%" PRIu64 " is not 256, 512, 1024, 2048 or 4096", mtu);
	}
	sgid = sgid_index(v4, r);
	if (sgid < 0)
		return -1;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.pkey_index = 0;
	attr.port_num = PORT_NUM;
	mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (e->qp->qp_type == IBV_QPT_UD) {
		attr.qkey = (uint32_t)qkey;
		mask |= IBV_QP_QKEY;
	} else {
		attr.qp_access_flags = access;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(e->qp, &attr, mask))
		return fail(r, "modify to INIT: %s", strerror(errno));

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (e->qp->qp_type != IBV_QPT_UD) {
		attr.path_mtu = ibmtu;
		attr.dest_qp_num = (uint32_t)dest_qpn;
		attr.rq_psn = (uint32_t)rq_psn;
		attr.ah_attr.is_global = 1;
		attr.ah_attr.grh.dgid = gid;
		attr.ah_attr.grh.sgid_index = (uint8_t)sgid;
		attr.ah_attr.grh.hop_limit = (uint8_t)hop_limit;
		attr.ah_attr.grh.traffic_class = (uint8_t)tclass;
		attr.ah_attr.port_num = PORT_NUM;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	}
	if (e->qp->qp_type == IBV_QPT_RC) {
		attr.max_dest_rd_atomic = (uint8_t)mdrd;
		attr.min_rnr_timer = (uint8_t)minrnr;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	if (ibv_modify_qp(e->qp, &attr, mask))
		return fail(r, "modify to RTR: %s", strerror(errno));

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = (uint32_t)sq_psn;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (e->qp->qp_type == IBV_QPT_RC) {
		attr.timeout = (uint8_t)timeout;
		attr.retry_cnt = (uint8_t)retry;
		attr.rnr_retry = (uint8_t)rnr;
		attr.max_rd_atomic = (uint8_t)mrd;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (ibv_modify_qp(e->qp, &attr, mask))
		return fail(r, "modify to RTS: %s", strerror(errno));
	put(r, "OK");
	return 0;
}

static int do_modify_qp(struct session *s, struct args *a, struct reply *r)
{
	const char *state = get(a, "state");
	struct ibv_qp_attr attr;
	struct qp_entry *e;
	uint64_t qpn;

	e = qp_arg(s, a, &qpn, r);
	if (!e)
		return -1;
	if (!state)
		return fail(r, "modify_qp: state= missing");
	if (finish(a, r))
		return -1;
	memset(&attr, 0, sizeof(attr));
	if (!strcmp(state, "ERR"))
		attr.qp_state = IBV_QPS_ERR;
	else if (!strcmp(state, "RESET"))
		attr.qp_state = IBV_QPS_RESET;
	else
		return fail(r, "modify_qp: state %.20s needs attributes: use connect_qp (or ERR, RESET)",
			    state);
	if (ibv_modify_qp(e->qp, &attr, IBV_QP_STATE))
		return fail(r, "ibv_modify_qp: %s", strerror(errno));
	put(r, "OK");
	return 0;
}

static int do_query_qp(struct session *s, struct args *a, struct reply *r)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	struct qp_entry *e;
	uint64_t qpn;

	e = qp_arg(s, a, &qpn, r);
	if (!e || finish(a, r))
		return -1;
	if (ibv_query_qp(e->qp, &attr, IBV_QP_STATE, &init))
		return fail(r, "ibv_query_qp: %s", strerror(errno));
	put(r, "OK state=%s", state_name(attr.qp_state));
	return 0;
}

static int do_destroy_qp(struct session *s, struct args *a, struct reply *r)
{
	struct qp_entry *e;
	uint64_t qpn;

	e = qp_arg(s, a, &qpn, r);
	if (!e || finish(a, r))
		return -1;
	if (ibv_destroy_qp(e->qp))
		return fail(r, "ibv_destroy_qp: %s", strerror(errno));
	ibv_destroy_cq(e->cq);
	memset(e, 0, sizeof(*e));
	if (s->waiting && s->wait_qpn == qpn)
		s->waiting = 0;
	put(r, "OK");
	return 0;
}

/* The one SGE of a work request: `mr=`, `off=`, `len=` (a length of 0: no SGE). */
static int sge_arg(struct session *s, struct args *a, struct ibv_sge *sge, struct reply *r)
{
	uint64_t len, off;
	struct mr_entry *m;

	if (num(a, "len", UINT32_MAX, 1, 0, &len, r))
		return -1;
	m = region(s, a, len, &off, r);
	if (!m)
		return -1;
	sge->addr = (uintptr_t)m->buf + off;
	sge->length = (uint32_t)len;
	sge->lkey = m->mr->lkey;
	return 0;
}

static int do_post_recv(struct session *s, struct args *a, struct reply *r)
{
	uint64_t qpn, wr_id;
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;
	struct qp_entry *e;

	e = qp_arg(s, a, &qpn, r);
	if (!e || num(a, "wr_id", UINT64_MAX, 0, 0, &wr_id, r) || sge_arg(s, a, &sge, r) ||
	    finish(a, r))
		return -1;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = sge.length ? &sge : NULL;
	wr.num_sge = sge.length ? 1 : 0;
	if (ibv_post_recv(e->qp, &wr, &bad))
		return fail(r, "ibv_post_recv: %s", strerror(errno));
	put(r, "OK");
	return 0;
}

static int do_post_send(struct session *s, struct args *a, struct reply *r)
{
	static const char *const ops[] = { "send", "send_imm", "write", "write_imm", "read", "cas",
					   "faa" };
	static const int op_values[] = { IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
					 IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ,
					 IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD };
	int opcode;
	uint64_t qpn, wr_id, raddr, rkey, imm, compare, swap_add, signaled, dqpn, dqkey, tclass;
	const char *op = get(a, "op"), *dest = get(a, "dest");
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct qp_entry *e;

	e = qp_arg(s, a, &qpn, r);
	if (!e || num(a, "wr_id", UINT64_MAX, 0, 0, &wr_id, r) || sge_arg(s, a, &sge, r) ||
	    num(a, "remote_addr", UINT64_MAX, 0, 0, &raddr, r) ||
	    num(a, "rkey", UINT32_MAX, 0, 0, &rkey, r) || num(a, "imm", UINT32_MAX, 0, 0, &imm, r) ||
	    num(a, "compare", UINT64_MAX, 0, 0, &compare, r) ||
	    num(a, "swap_add", UINT64_MAX, 0, 0, &swap_add, r) ||
	    num(a, "signaled", 1, 0, 1, &signaled, r) ||
	    num(a, "dest_qpn", 0xffffff, dest != NULL, 0, &dqpn, r) ||
	    num(a, "dest_qkey", UINT32_MAX, 0, 0, &dqkey, r) ||
	    num(a, "traffic_class", 255, 0, 0, &tclass, r))
		return -1;
	if (!op)
		return fail(r, "post_send: op= missing");
	if (!dest && get(a, "traffic_class"))
		return fail(r, "traffic_class= goes with dest= (a UD address handle)");
	if (finish(a, r))
		return -1;
	memset(&wr, 0, sizeof(wr));
	opcode = pick(op, ops, op_values, 7);
	if (opcode < 0)
		return fail(r, "operation \"%.20s\" is not one of send, send_imm, write, write_imm, "
			    "read, cas, faa", op);
	wr.opcode = (enum ibv_wr_opcode)opcode;
	wr.wr_id = wr_id;
	wr.sg_list = sge.length ? &sge : NULL;
	wr.num_sge = sge.length ? 1 : 0;
	wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
	wr.imm_data = htonl((uint32_t)imm);
	if (wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = (uint32_t)rkey;
		wr.wr.atomic.compare_add = wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? compare : swap_add;
		wr.wr.atomic.swap = swap_add;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = (uint32_t)rkey;
	}
	if (dest) {
		struct ibv_ah_attr ah_attr;
		struct ibv_ah **slot = NULL;
		int v4, sgid, i;

		if (e->qp->qp_type != IBV_QPT_UD)
			return fail(r, "dest= is for UD QPs");
		memset(&ah_attr, 0, sizeof(ah_attr));
		if (addr_gid(dest, &ah_attr.grh.dgid, &v4, r))
			return -1;
		sgid = sgid_index(v4, r);
		if (sgid < 0)
			return -1;
		for (i = 0; i < MAX_OBJECTS && !slot; i++)
			if (!s->ahs[i])
				slot = &s->ahs[i];
		if (!slot)
			return fail(r, "at most %d UD destinations", MAX_OBJECTS);
		ah_attr.is_global = 1;
		ah_attr.grh.sgid_index = (uint8_t)sgid;
		ah_attr.grh.hop_limit = 64;
		ah_attr.grh.traffic_class = (uint8_t)tclass;
		ah_attr.port_num = PORT_NUM;
		*slot = ibv_create_ah(s->pd, &ah_attr);
		if (!*slot)
			return fail(r, "ibv_create_ah: %s", strerror(errno));
		wr.wr.ud.ah = *slot;
		wr.wr.ud.remote_qpn = (uint32_t)dqpn;
		wr.wr.ud.remote_qkey = (uint32_t)dqkey;
	} else if (e->qp->qp_type == IBV_QPT_UD) {
		return fail(r, "a UD QP needs dest= and dest_qpn=");
	}
	if (ibv_post_send(e->qp, &wr, &bad))
		return fail(r, "ibv_post_send: %s", strerror(errno));
	put(r, "OK");
	return 0;
}

/* Completions of a QP's CQ into the reply; how many. */
static int drain(struct qp_entry *e, uint32_t max, struct reply *r)
{
	struct ibv_wc wc[MAX_POLL];
	int n, i;

	n = ibv_poll_cq(e->cq, (int)max, wc);
	if (n < 0)
		return fail(r, "ibv_poll_cq failed");
	put(r, "OK n=%d", n);
	for (i = 0; i < n; i++) {
		put(r, " wc=%" PRIu64 ":%s:%s:%" PRIu32 ":", wc[i].wr_id, status_name(wc[i].status),
		    opcode_name(wc[i].opcode), wc[i].byte_len);
		if (wc[i].status == IBV_WC_SUCCESS && (wc[i].wc_flags & IBV_WC_WITH_IMM))
			put(r, "0x%" PRIx32, ntohl(wc[i].imm_data));
		else
			put(r, "-");
	}
	return n;
}

/* 1: reply ready; 0: the poll waits. */
static int do_poll_cq(struct session *s, struct args *a, struct reply *r)
{
	uint64_t qpn, max, timeout;
	struct qp_entry *e;
	int n;

	e = qp_arg(s, a, &qpn, r);
	if (!e || num(a, "max", MAX_POLL, 0, 16, &max, r) ||
	    num(a, "timeout_ms", MAX_POLL_MS, 0, 0, &timeout, r) || finish(a, r))
		return 1;
	n = drain(e, (uint32_t)max, r);
	if (n != 0 || timeout == 0)
		return 1;
	r->len = 0;
	s->waiting = 1;
	s->wait_qpn = (uint32_t)qpn;
	s->wait_max = (uint32_t)max;
	s->wait_until = now_ms() + timeout;
	return 0;
}

/* ---- the connection ---- */

static int send_line(struct session *s, struct reply *r)
{
	size_t off = 0;

	if (r->len >= sizeof(r->buf))
		r->len = sizeof(r->buf) - 1;
	r->buf[r->len++] = '\n';
	while (off < r->len) {
		ssize_t n = send(s->fd, r->buf + off, r->len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

/* Handles one request line; returns -1 when the session must end. */
static int handle(struct session *s, char *line)
{
	struct reply r;
	struct args a;
	int bye = 0, ready = 1;

	memset(&r, 0, sizeof(r));
	if (split(line, &a, &r) == 0) {
		say("session %d: %s", s->fd, a.verb);
		if (!strcmp(a.verb, "hello")) {
			if (finish(&a, &r) == 0)
				put(&r, "OK version=%d agent=libibverbs:%s cc=none", VERSION, dev_name);
		} else if (!strcmp(a.verb, "bye")) {
			if (finish(&a, &r) == 0) {
				put(&r, "OK");
				bye = 1;
			}
		} else if (!strcmp(a.verb, "reg_mr")) {
			do_reg_mr(s, &a, &r);
		} else if (!strcmp(a.verb, "dereg_mr")) {
			do_dereg_mr(s, &a, &r);
		} else if (!strcmp(a.verb, "read_mr")) {
			do_read_mr(s, &a, &r);
		} else if (!strcmp(a.verb, "write_mr")) {
			do_write_mr(s, &a, &r);
		} else if (!strcmp(a.verb, "create_qp")) {
			do_create_qp(s, &a, &r);
		} else if (!strcmp(a.verb, "connect_qp")) {
			do_connect_qp(s, &a, &r);
		} else if (!strcmp(a.verb, "modify_qp")) {
			do_modify_qp(s, &a, &r);
		} else if (!strcmp(a.verb, "query_qp")) {
			do_query_qp(s, &a, &r);
		} else if (!strcmp(a.verb, "destroy_qp")) {
			do_destroy_qp(s, &a, &r);
		} else if (!strcmp(a.verb, "post_recv")) {
			do_post_recv(s, &a, &r);
		} else if (!strcmp(a.verb, "post_send")) {
			do_post_send(s, &a, &r);
		} else if (!strcmp(a.verb, "poll_cq")) {
			ready = do_poll_cq(s, &a, &r);
		} else {
			fail(&r, "unknown request \"%.40s\"", a.verb);
		}
	}
	if (!ready)
		return 0;
	if (send_line(s, &r) || bye)
		return -1;
	return 0;
}

/* A waiting poll_cq: answers it if a completion came or its time is up. */
static int resume(struct session *s)
{
	struct qp_entry *e = find_qp(s, s->wait_qpn);
	struct reply r;
	int n;

	memset(&r, 0, sizeof(r));
	if (!e) {
		s->waiting = 0;
		fail(&r, "QP %" PRIu32 " is gone", s->wait_qpn);
		return send_line(s, &r);
	}
	n = drain(e, s->wait_max, &r);
	if (n == 0 && now_ms() < s->wait_until)
		return 0;
	s->waiting = 0;
	return send_line(s, &r);
}

/* Reads what arrived and handles complete lines (one at a time while a poll waits). */
static int serve(struct session *s, int readable)
{
	char *nl;

	if (readable) {
		ssize_t n = recv(s->fd, s->in + s->in_len, sizeof(s->in) - 1 - s->in_len, 0);

		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			return -1;
		if (n > 0)
			s->in_len += (size_t)n;
	}
	while (!s->waiting) {
		s->in[s->in_len] = 0;
		nl = memchr(s->in, '\n', s->in_len);
		if (!nl) {
			if (s->in_len >= sizeof(s->in) - 1) {
				struct reply r;

				memset(&r, 0, sizeof(r));
				fail(&r, "line longer than %d bytes", MAX_LINE);
				send_line(s, &r);
				return -1;
			}
			break;
		}
		{
			size_t len = (size_t)(nl - s->in);

			*nl = 0;
			if (len && s->in[len - 1] == '\r')
				s->in[--len] = 0;
			if (strlen(s->in) != len) {
				struct reply r;

				memset(&r, 0, sizeof(r));
				fail(&r, "a NUL byte in the request");
				if (send_line(s, &r))
					return -1;
			} else if (handle(s, s->in)) {
				return -1;
			}
		}
		s->in_len -= (size_t)(nl + 1 - s->in);
		memmove(s->in, nl + 1, s->in_len);
	}
	return 0;
}

static int listen_on(int port)
{
	struct sockaddr_in6 a6;
	struct sockaddr_in a4;
	int fd, one = 1, zero = 0;

	fd = socket(AF_INET6, SOCK_STREAM, 0);
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		memset(&a6, 0, sizeof(a6));
		a6.sin6_family = AF_INET6;
		a6.sin6_addr = in6addr_any;
		a6.sin6_port = htons((uint16_t)port);
		if (bind(fd, (struct sockaddr *)&a6, sizeof(a6)) == 0 && listen(fd, 8) == 0)
			return fd;
		close(fd);
	}
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&a4, 0, sizeof(a4));
	a4.sin_family = AF_INET;
	a4.sin_addr.s_addr = htonl(INADDR_ANY);
	a4.sin_port = htons((uint16_t)port);
	if (bind(fd, (struct sockaddr *)&a4, sizeof(a4)) || listen(fd, 8)) {
		close(fd);
		return -1;
	}
	return fd;
}

static void accept_one(int lfd)
{
	struct session *s;
	struct timeval tv = { .tv_sec = 10 };
	int fd, i, one = 1;

	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		return;
	for (i = 0; i < MAX_SESSIONS; i++)
		if (!sessions[i])
			break;
	s = i < MAX_SESSIONS ? calloc(1, sizeof(*s)) : NULL;
	if (!s) {
		static const char busy[] = "ERR too many sessions\n";

		if (send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL) < 0)
			say("refusing a session: %s", strerror(errno));
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* A tester that stops reading must not stall the agent for long. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	s->fd = fd;
	s->pd = ibv_alloc_pd(ctx);
	if (!s->pd) {
		static const char nopd[] = "ERR ibv_alloc_pd failed\n";

		if (send(fd, nopd, sizeof(nopd) - 1, MSG_NOSIGNAL) < 0)
			say("refusing a session: %s", strerror(errno));
		close(fd);
		free(s);
		return;
	}
	sessions[i] = s;
	say("session %d opened", fd);
}

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [-p PORT] [-d DEVICE] [-o] [-v]\n"
		"  Serves the roce conform agent protocol (PROTOCOL.md) on TCP PORT (default %d),\n"
		"  on every address of the host, with the first RDMA device (or DEVICE).\n"
		"  -o: exit when the first session ends.  -v: log each request on stderr.\n"
		"example: %s -p 7471 -d rxe0   # then, on the tester: roce conform PEER ...\n",
		prog, DEFAULT_PORT, prog);
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	const char *want = NULL;
	int port = DEFAULT_PORT, opt, lfd, i, n;

	while ((opt = getopt(argc, argv, "p:d:ovh")) != -1) {
		switch (opt) {
		case 'p': {
			char *end;
			long p = strtol(optarg, &end, 10);

			if (*end || p < 1 || p > 65535) {
				fprintf(stderr, "conform-agent: -p %s is not a TCP port\n", optarg);
				return 1;
			}
			port = (int)p;
			break;
		}
		case 'd':
			want = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'o':
			once = 1;
			break;
		case 'h':
			usage(argv[0]);
			return 0;
		default:
			usage(argv[0]);
			return 1;
		}
	}
	if (optind != argc) {
		usage(argv[0]);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		fprintf(stderr, "conform-agent: no RDMA device (is rdma_rxe loaded and linked?)\n");
		return 1;
	}
	for (i = 0; i < n; i++)
		if (!want || !strcmp(ibv_get_device_name(list[i]), want))
			break;
	if (i == n) {
		fprintf(stderr, "conform-agent: no RDMA device named %s\n", want);
		return 1;
	}
	dev_name = strdup(ibv_get_device_name(list[i]));
	ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, "conform-agent: cannot open %s: %s\n", dev_name, strerror(errno));
		return 1;
	}
	lfd = listen_on(port);
	if (lfd < 0) {
		fprintf(stderr, "conform-agent: cannot listen on TCP port %d: %s\n", port,
			strerror(errno));
		return 1;
	}
	printf("conform-agent: listening on TCP port %d with %s\n", port, dev_name);
	fflush(stdout);
	for (;;) {
		struct pollfd fds[MAX_SESSIONS + 1];
		struct session *who[MAX_SESSIONS + 1];
		int nfds = 0, waiting = 0;

		fds[nfds].fd = lfd;
		fds[nfds].events = POLLIN;
		who[nfds++] = NULL;
		for (i = 0; i < MAX_SESSIONS; i++) {
			if (!sessions[i])
				continue;
			fds[nfds].fd = sessions[i]->fd;
			fds[nfds].events = POLLIN;
			who[nfds++] = sessions[i];
			waiting |= sessions[i]->waiting;
		}
		if (poll(fds, (nfds_t)nfds, waiting ? 1 : 1000) < 0 && errno != EINTR) {
			perror("conform-agent: poll");
			return 1;
		}
		if (fds[0].revents & POLLIN)
			accept_one(lfd);
		for (i = 1; i < nfds; i++) {
			struct session *s = who[i];
			int readable = (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
			int gone = 0;

			if (s->waiting && resume(s))
				gone = 1;
			if (!gone && (readable || !s->waiting) && serve(s, readable))
				gone = 1;
			if (gone) {
				int k;

				say("session %d closed", s->fd);
				for (k = 0; k < MAX_SESSIONS; k++)
					if (sessions[k] == s)
						sessions[k] = NULL;
				session_free(s);
				sessions_ended++;
			}
		}
		if (once && sessions_ended)
			break;
	}
	close(lfd);
	ibv_close_device(ctx);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/* The gateway's control lines (src/net/gwctl.c): what is accepted, what is refused, and
 * that every message sent parses back to itself. */
#include "net/gwctl.h"
#include "tap.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static void accepted(void)
{
	struct net_gwctl m;

	CHECK(net_gwctl_parse("R", &m) == 0 && m.kind == NET_GWCTL_READY, "R");
	CHECK(net_gwctl_parse("P", &m) == 0 && m.kind == NET_GWCTL_POOLED, "P");
	CHECK(net_gwctl_parse("A", &m) == 0 && m.kind == NET_GWCTL_ATTACHED && m.gen == 0, "A");
	CHECK(net_gwctl_parse("A 42", &m) == 0 && m.kind == NET_GWCTL_ATTACHED && m.gen == 42,
	      "A 42");
	CHECK(net_gwctl_parse("E22 bad policy: x", &m) == 0 && m.kind == NET_GWCTL_ERROR &&
		  m.code == 22 && strcmp(m.text, "bad policy: x") == 0,
	      "E22 with its text");
	CHECK(net_gwctl_parse("POLICY 7 {\"allow\":[\"a.test\"]}", &m) == 0 &&
		  m.kind == NET_GWCTL_POLICY && m.gen == 7 &&
		  strcmp(m.text, "{\"allow\":[\"a.test\"]}") == 0,
	      "POLICY gen json");
	CHECK(net_gwctl_parse("PID 4242", &m) == 0 && m.kind == NET_GWCTL_PID && m.gen == 4242,
	      "PID 4242");
}

static void refused(void)
{
	static const char *const bad[] = {
	    "",
	    "r",
	    "RR",
	    "R ",
	    " R",
	    "A x",
	    "A -1",
	    "A 1 2",
	    "A 99999999999999999999999",
	    "E",
	    "E22",
	    "E0 zero",
	    "E4096 too big",
	    "E-1 neg",
	    "Ex y",
	    "POLICY",
	    "POLICY 7",
	    "POLICY 7 ",
	    "POLICY x {}",
	    "POLICY -7 {}",
	    "PID",
	    "PID 0",
	    "PID -1",
	    "PID 12x",
	    "PID 1073741824",
	    "R\r",
	    "E5 a\tb",
	    "POLICY 1 {}\x7f",
	    "HELLO",
	};
	int wrong = 0;

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct net_gwctl m;

		if (net_gwctl_parse(bad[i], &m) == 0) {
			wrong++;
			printf("# accepted: '%s'\n", bad[i]);
		}
	}
	CHECK(wrong == 0, "%zu malformed lines refused", sizeof(bad) / sizeof(*bad));
}

static int round_trip(const struct net_gwctl *m, struct net_gwctl *back, char *buf, size_t cap)
{
	int p[2];
	ssize_t n;

	if (pipe(p) < 0)
		return -1;
	n = net_gwctl_send(p[1], m) == 0 ? read(p[0], buf, cap - 1) : -1;
	close(p[0]);
	close(p[1]);
	if (n <= 0 || buf[n - 1] != '\n')
		return -1;
	buf[n - 1] = '\0';
	return net_gwctl_parse(buf, back);
}

static void sent(void)
{
	char buf[2048];
	struct net_gwctl b;

	CHECK(round_trip(&(struct net_gwctl){.kind = NET_GWCTL_ERROR,
					     .code = EACCES,
					     .text = "two\nlines\tand a tab"},
			 &b, buf, sizeof(buf)) == 0 &&
		  b.code == EACCES && strcmp(b.text, "two lines and a tab") == 0,
	      "an error's control characters become spaces: '%s'", buf);
	CHECK(round_trip(&(struct net_gwctl){.kind = NET_GWCTL_ERROR, .code = 0, .text = ""}, &b,
			 buf, sizeof(buf)) == 0 &&
		  b.code == EIO && strcmp(b.text, "-") == 0,
	      "an error without a code or text is EIO '-': '%s'", buf);
	CHECK(round_trip(
		  &(struct net_gwctl){.kind = NET_GWCTL_POLICY, .gen = 9, .text = "\"deny-all\""},
		  &b, buf, sizeof(buf)) == 0 &&
		  b.kind == NET_GWCTL_POLICY && b.gen == 9 && strcmp(b.text, "\"deny-all\"") == 0,
	      "a policy round-trips: '%s'", buf);
	CHECK(round_trip(&(struct net_gwctl){.kind = NET_GWCTL_PID, .gen = 77}, &b, buf,
			 sizeof(buf)) == 0 &&
		  b.kind == NET_GWCTL_PID && b.gen == 77,
	      "a pid round-trips");
	CHECK(round_trip(&(struct net_gwctl){.kind = NET_GWCTL_ATTACHED, .gen = 5}, &b, buf,
			 sizeof(buf)) == 0 &&
		  b.kind == NET_GWCTL_ATTACHED && b.gen == 5,
	      "attached with a generation round-trips");
}

int main(void)
{
	accepted();
	refused();
	sent();
	return tap_done();
}

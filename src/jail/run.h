/* SPDX-License-Identifier: MIT */
/*
 * What airlock's own CLI asks of a one-shot beyond the public al_run (include/airlock):
 * the caches made ahead of need it may draw on (src/jail/ahead/README.md) and how its
 * caller ends. A library user gets none of these from al_run: no pool, no templates, a
 * caller that lives on.
 */
#ifndef AL_JAIL_RUN_H
#define AL_JAIL_RUN_H

#include <airlock/airlock.h>
#include <stdbool.h>

struct jail_run_opts {
	/* The one-shot pool to draw namespaces from (jail/ahead/pool.h: its version
	 * directory), or NULL to make them. An empty or absent pool is no error. */
	const char *pool_dir;
	/* Where read-only root templates are kept (jail/ahead/template.h), or NULL to build
	 * every root. A run whose settings no template suits builds its own. */
	const char *template_dir;
	/* Where deny-all runs recycle clean network namespaces (jail/ahead/recycle.h: its
	 * ROOT), or NULL to make a fresh one for every run and destroy it after. */
	const char *recycle_root;
	/* The caller exits right after the run returns (the airlock CLI): a gateway with no
	 * egress log to finish is then killed and not waited for; the kernel ends it while the
	 * caller exits, and whoever reaps the caller's orphans reaps it. false in a process
	 * that lives on, so that every child it had is reaped before the run returns. */
	bool caller_exits;
};

/* al_run with those options. */
int jail_run(const struct al_config *cfg, const struct al_io *io, const struct jail_run_opts *o,
	     struct al_result *res, struct al_error **err);

/* Surely no per-request rules in this policy document (docs/network-policy.md: the
 * record form's non-empty arrays)? Unparsable is "not sure" (false): the gateway will say
 * what is wrong. Such a policy needs no CA in the sandbox and gets the lite gateway. */
bool jail_policy_without_rules(const char *doc);

#endif

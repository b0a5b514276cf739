/* SPDX-License-Identifier: MIT */
/*
 * Root templates for one-shot runs. Most runs ask for the same root: the host runtime,
 * the default hostname, no --image, no --file, the default workdir, no CA. Building it
 * (a copy of the host's mount table, a tmpfs, a dozen binds, /etc, /dev, pivot_root,
 * the host's mounts detached) is most of a child's set-up; a template is that root built
 * once, read-only, in a mount namespace of its own. A run's child joins it, takes a
 * private copy (unshare(CLONE_NEWNS)) and adds only what is its own: one writable tmpfs
 * (its --disk) bound to /tmp, /workspace, /home/user and /dev/shm, a devpts instance,
 * /proc (rootfs.c, jail_rootfs_enter_template).
 *
 * Layout, under DIR (default /run/airlock/template, $AIRLOCK_TEMPLATE):
 *   DIR/lock              held (flock) by whoever makes a template
 *   DIR/VARIANT-KEY       the template's mount namespace, pinned by a bind mount of its
 *                         nsfs file. VARIANT: deny (loopback only) or link (resolv.conf
 *                         names the gateway). KEY hashes what the template binds from the
 *                         host (device, inode and type of /usr, /bin, ..., /etc/ld.so.cache,
 *                         ...) and the code that makes it (a hash of its sources, made by
 *                         meson.build): `ldconfig` replaces /etc/ld.so.cache, a package
 *                         replaces a symlink, a change to that code changes the layout,
 *                         and each of these makes a new key, so no run joins a stale
 *                         template. Every build of the same code shares it. Making one
 *                         removes the variant's others.
 *
 * Never written after it is made: its root's superblock is read-only, its mounts private.
 * A template is no state of any sandbox: what sandboxes share through it is what they
 * already share through the host's read-only /usr.
 */
#ifndef AL_JAIL_TEMPLATE_H
#define AL_JAIL_TEMPLATE_H

#include <airlock/airlock.h>
#include <stdbool.h>
#include <stddef.h>

#define JAIL_TEMPLATE_ROOT "/run/airlock/template"

/* dir, else $AIRLOCK_TEMPLATE, else JAIL_TEMPLATE_ROOT (a relative path counts as none). */
const char *jail_template_root(const char *dir);
/* Does a template suit a run of these settings (and with this CA to install, or NULL)? */
bool jail_template_fits(const struct al_config *cfg, const char *ca_pem);
/* The template's mount namespace for a run (made now if there is none for the host as it
 * is), as an fd the caller closes; -1 with err if none could be had (the run then builds
 * its root itself). */
int jail_template_open(const char *dir, bool net_link, struct al_error **err);
/* Unpin and remove every template under dir, and dir. Returns how many, or -1 with err. */
int jail_template_drop(const char *dir, struct al_error **err);
/* How many templates are pinned under dir. */
unsigned jail_template_count(const char *dir);

#endif

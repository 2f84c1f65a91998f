/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One gateway per interface and address. Two gateways on the same
 * interface with the same address would both answer ARP and take each
 * other's datagrams (af_packet hands every frame to both): the second one
 * is refused at start. Each identity holds an flock(2) on a file named by
 * its device and address, under a runtime directory shared by every
 * gateway of the host (/run/embgw, or /tmp/embgw-locks-UID where /run is
 * not writable), for its whole life: the kernel drops the lock when the
 * process ends however it ends, so a killed gateway never blocks the next
 * start. The file holds the owner's PID, for the refusal's message. The
 * owner removes it at its exit while it still holds the lock; a start
 * that locked a file removed meanwhile (it opened the name before the
 * removal) sees another inode at the name and tries again, so no two
 * gateways ever hold locks for one name. A killed gateway's file stays
 * (its lock is gone) and is taken by the next start.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gw.h"

/* The device's part of the key: what names the link, not the vdev's
 * instance name (net_af_packet0 and net_af_packet3 on one iface= meet). */
static void
device_key(const char *device, char *out, size_t n)
{
	const char *iface = strstr(device, "iface=");
	size_t len;

	if (iface != NULL) {
		iface += strlen("iface=");
		len = strcspn(iface, ",");
		snprintf(out, n, "iface-%.*s", (int)len, iface);
	} else {
		snprintf(out, n, "dev-%s", device);
	}
	for (char *p = out; *p != '\0'; p++)
		if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') &&
		    !(*p >= '0' && *p <= '9') && *p != '.' && *p != '-')
			*p = '_';
}

static const char *
lock_dir(char *buf, size_t n)
{
	if (mkdir("/run/embgw", 0755) == 0 || errno == EEXIST) {
		if (access("/run/embgw", W_OK) == 0)
			return "/run/embgw";
	}
	snprintf(buf, n, "/tmp/embgw-locks-%u", (unsigned)getuid());
	if (mkdir(buf, 0700) != 0 && errno != EEXIST)
		return NULL;
	return buf;
}

int
gw_port_lock(struct gw_id *id)
{
	char dir[64], key[EGW_CONF_PATH_LEN + 8], path[EGW_CONF_PATH_LEN + 128];
	char pid[32];
	const char *d = lock_dir(dir, sizeof(dir));
	uint32_t a = id->cfg->addr;
	ssize_t n;
	int fd;

	if (d == NULL) {
		GW_LOG(ERR, "port %s: no runtime directory for the lock on its "
		       "interface and address (/run/embgw, %s): %s\n",
		       id->cfg->name, dir, strerror(errno));
		return -errno;
	}
	device_key(id->cfg->device, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/%s@%u.%u.%u.%u.lock", d, key,
		 a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
	for (int tries = 0;; tries++) {
		struct stat fs, ps;

		fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0) {
			GW_LOG(ERR, "port %s: cannot open the lock %s: %s\n",
			       id->cfg->name, path, strerror(errno));
			return -errno;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) != 0)
			break;
		/* locked: still the file at the name? (its owner removes it
		 * at exit, holding the lock) */
		if (fstat(fd, &fs) == 0 && stat(path, &ps) == 0 &&
		    fs.st_dev == ps.st_dev && fs.st_ino == ps.st_ino)
			goto locked;
		close(fd);
		if (tries == 8) {
			GW_LOG(ERR, "port %s: the lock %s keeps being replaced\n",
			       id->cfg->name, path);
			return -EAGAIN;
		}
	}
	{
		int e = errno;

		n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		close(fd);
		if (e != EWOULDBLOCK) {
			GW_LOG(ERR, "port %s: cannot lock %s: %s\n",
			       id->cfg->name, path, strerror(e));
			return -e;
		}
		GW_LOG(ERR, "port %s: another gateway (pid %s) runs on %s with "
		       "address %u.%u.%u.%u (it holds %s): refused - two "
		       "gateways on one interface and address would take each "
		       "other's datagrams; stop it or give this one another "
		       "interface or address\n", id->cfg->name,
		       pid[0] != '\0' ? pid : "unknown", id->cfg->device,
		       a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff,
		       path);
		return -EBUSY;
	}
locked:
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) != 0 ||
	    pwrite(fd, pid, strlen(pid), 0) != (ssize_t)strlen(pid))
		GW_LOG(WARNING, "port %s: cannot write our pid into %s: %s\n",
		       id->cfg->name, path, strerror(errno));
	id->lock_fd = fd;
	snprintf(id->lock_path, sizeof(id->lock_path), "%s", path);
	return 0;
}

void
gw_port_unlock(struct gw_id *id)
{
	if (id->lock_fd < 0)
		return;
	/* removed while still ours: see the top of this file */
	unlink(id->lock_path);
	close(id->lock_fd);
	id->lock_fd = -1;
}

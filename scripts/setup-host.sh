#!/usr/bin/env bash
# Installs the system packages agent-runner uses. Idempotent: installs only what is missing.
#   bubblewrap  the local sandbox (required)
#   util-linux  prlimit for rlimits (required; essential on Debian); nsenter and setpriv for job egress
#   passt       pasta: user-mode networking for run jobs allowed the network (without it they do not run)
#   nftables    nft: the egress filter inside such a job's network namespace
#   golang-go   the go language
#   runsc       gVisor, the `gvisor` backend (optional: without it that kind is unavailable). On
#               Debian 12 from bookworm-backports (2024-07: /proc/sys/kernel/random/boot_id, extended
#               attributes, checkpoints that leave the sandbox running), that suite added pinned to
#               this one package; bookworm's own (2022-12) still works where backports are absent
#   qemu-system-x86, linux-image-amd64, busybox-static, squashfs-tools, cpio
#               the `microvm` backend: QEMU -M microvm booting Debian's kernel on a root image
#               built from this host's files (its image is built on first use, cached by hash)
#   postgresql  the distributed mode's database (`serve --database`, `agent-runner worker`); the
#               test suite starts throw-away clusters of its own from its programs
#   socat       vsock bridging for `agent-runner guest --listen vsock:PORT`, and the relay that
#               puts a job's egress proxy (policy.network.allow_domains) on its loopback
#   iproute2    ip: the test suite's own upstream hosts in network namespaces (egress tests)
#   gcc, libc6-dev  the exec guard (native/exec-guard.c), built statically by `npm run build`
#   chromium    the browser the dashboard's test drives (test/integration/http/dashboard.test.ts)
#   g++, ruby, php-cli, perl, lua5.4, default-jdk-headless
#               the cpp, ruby, php, perl, lua and java languages (gcc above is c's)
#   python3-pyflakes  `npm run lint` checks the python that runs in sandboxes (scripts/lint-guest.sh)
#   python3-ipython, python3-matplotlib, python3-pandas, python3-numpy
#               the code interpreter's python kernel and what its template gives (charts, tables)
#   r-base-core the code interpreter's r kernel (its java kernel is default-jdk-headless's JShell)
#   docker-registry, skopeo, apache2-utils, umoci
#               the test suite's loopback registry for templates from images (test/helpers/oci-*.ts):
#               the registry itself, skopeo to push images to it and read them back, htpasswd for
#               its basic auth's bcrypt file, umoci to unpack a fixture image as a reference
#   debootstrap the Debian root file system the template tests build from (test/helpers/oci-debian.ts)
#   xvfb, x11-utils, x11-xserver-utils, xfce4, xfce4-terminal, dbus-x11, xdotool, scrot, x11vnc,
#   novnc, net-tools, xdg-utils, libgtk-3-bin
#               the `desktop` template (@e2b/desktop): a virtual display, XFCE, input, screenshots
#               and a VNC stream served by noVNC (src/sandboxes/desktop-template.ts); its browser
#               is chromium, above
# Then CRIU, built from Debian 13's source with the project's patches (scripts/build-criu.sh):
# local_process sandboxes paused, forked and snapshotted with their memory.
# Python 3, bash and gcc (the linker rustc calls) come with Debian; rust comes from rustup or
# `apt-get install rustc`; typescript is transpiled by the esbuild in node_modules (npm ci).
# Without root this only reports what is missing.
set -euo pipefail

want=()
need() { command -v "$1" >/dev/null 2>&1 || want+=("$2"); }
need bwrap bubblewrap
need prlimit util-linux
need pasta passt
need nft nftables
need go golang-go
need socat socat
need ip iproute2
need runsc runsc
# runsc prints "runsc version 0.0~YYYYMMDD.0": older than backports' is replaced by it.
# Without runsc the pipeline fails (127), which set -e and pipefail would make this script's exit.
runsc_date=$( (runsc --version 2>/dev/null || true) | sed -n 's/^runsc version [^~]*~\([0-9]\{8\}\).*/\1/p')
if [ -n "$runsc_date" ] && [ "$runsc_date" -lt 20240729 ]; then want+=(runsc); fi
need qemu-system-x86_64 qemu-system-x86
compgen -G '/boot/vmlinuz-*' >/dev/null || want+=(linux-image-amd64)
[ -x /bin/busybox ] || want+=(busybox-static)
need mksquashfs squashfs-tools
need cpio cpio
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || want+=(postgresql)
need python3 python3
/usr/bin/python3 -c 'import pyflakes' 2>/dev/null || want+=(python3-pyflakes)
py_module() { /usr/bin/python3 -c "import $1" 2>/dev/null || want+=("$2"); }
py_module IPython python3-ipython
py_module matplotlib python3-matplotlib
py_module pandas python3-pandas
py_module numpy python3-numpy
need cc gcc
# The exec guard (native/) is linked statically.
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || want+=(libc6-dev)
need chromium chromium
need g++ g++
need ruby ruby
need php php-cli
need perl perl
need lua5.4 lua5.4
need javac default-jdk-headless
need R r-base-core
need docker-registry docker-registry
need skopeo skopeo
need htpasswd apache2-utils
need umoci umoci
need debootstrap debootstrap
need Xvfb xvfb
need xdpyinfo x11-utils
need xrandr x11-xserver-utils
need startxfce4 xfce4
need xfce4-terminal xfce4-terminal
need dbus-launch dbus-x11
need xdotool xdotool
need scrot scrot
need x11vnc x11vnc
[ -x /usr/share/novnc/utils/novnc_proxy ] || want+=(novnc)
need netstat net-tools
need xdg-open xdg-utils
need gtk-launch libgtk-3-bin

if [ ${#want[@]} -eq 0 ]; then
  echo "setup-host: all system packages present"
elif [ "$(id -u)" -ne 0 ]; then
  echo "setup-host: missing packages: ${want[*]} (run this script as root, or apt-get install them)" >&2
  exit 1
else
  echo "setup-host: installing ${want[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Debian 12's backports suite, for runsc alone: every other package of it pinned away.
  if grep -q '^VERSION_CODENAME=bookworm$' /etc/os-release && [ ! -e /etc/apt/sources.list.d/agent-runner-backports.sources ]; then
    printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' 'Components: main' \
      'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' >/etc/apt/sources.list.d/agent-runner-backports.sources
    printf '%s\n' 'Package: *' 'Pin: release n=bookworm-backports' 'Pin-Priority: -1' '' \
      'Package: runsc' 'Pin: release n=bookworm-backports' 'Pin-Priority: 990' >/etc/apt/preferences.d/agent-runner-backports
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
fi
bash "$(dirname "$0")/build-criu.sh"
echo "setup-host: done"

package inside

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// DropDefaultRoutes deletes the IPv4 and IPv6 default routes of this
// thread's network namespace and checks that none is left.
func DropDefaultRoutes() error {
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		for i := 0; i < 8; i++ { // one default route per interface at most
			err := deleteDefaultRoute(family)
			if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EAFNOSUPPORT) {
				break
			}
			if err != nil {
				return err
			}
		}
	}
	if left, err := hasDefaultRoute(); err != nil || left {
		return fmt.Errorf("a default route is still present (%v)", err)
	}
	return nil
}

// deleteDefaultRoute sends one RTM_DELROUTE for dst/0 in the main table and
// reads the kernel's acknowledgement.
func deleteDefaultRoute(family uint8) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("opening a netlink socket: %w", err)
	}
	defer unix.Close(fd)
	var msg bytes.Buffer
	hdr := unix.NlMsghdr{Len: unix.SizeofNlMsghdr + unix.SizeofRtMsg, Type: unix.RTM_DELROUTE,
		Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK, Seq: 1}
	rt := unix.RtMsg{Family: family, Table: unix.RT_TABLE_MAIN, Scope: unix.RT_SCOPE_NOWHERE}
	_ = binary.Write(&msg, binary.NativeEndian, hdr)
	_ = binary.Write(&msg, binary.NativeEndian, rt)
	if err := unix.Sendto(fd, msg.Bytes(), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("sending RTM_DELROUTE: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("reading the netlink answer: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return fmt.Errorf("parsing the netlink answer: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type == syscall.NLMSG_ERROR && len(m.Data) >= 4 {
			if code := int32(binary.NativeEndian.Uint32(m.Data[:4])); code != 0 {
				return unix.Errno(-code)
			}
		}
	}
	return nil
}

// hasDefaultRoute reads the IPv4 routing table of this thread's network
// namespace.
func hasDefaultRoute() (bool, error) {
	f, err := os.Open("/proc/thread-self/net/route")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 7 && fields[1] == "00000000" && fields[7] == "00000000" {
			return true, nil
		}
	}
	return false, sc.Err()
}

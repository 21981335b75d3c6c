package dockerx

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// Errors [Client.CreateNetwork] wraps when the engine refuses an address.
var (
	// ErrSubnetTaken: the requested subnet overlaps a network the engine
	// already has (another run may have taken it a moment ago).
	ErrSubnetTaken = errors.New("subnet overlaps an existing network")
	// ErrNoAddressPool: no subnet was requested and the engine's default
	// address pools are used up.
	ErrNoAddressPool = errors.New("the engine's default address pools are exhausted")
)

// The engine's words for the two refusals, lower-cased. "Pool overlaps"
// comes from the IPAM allocator (every version); "networks have
// overlapping" from the bridge driver's own check; the pool messages from
// the allocator with no subnet requested (before and after Engine 27).
var (
	overlapMessages   = []string{"pool overlaps with other one on this address space", "networks have overlapping ipv4"}
	exhaustedMessages = []string{"could not find an available, non-overlapping ipv4 address pool", "all predefined address pools have been fully subnetted"}
)

// networkError is an engine error marked with the sentinel it means.
type networkError struct {
	kind error
	err  error
}

func (e *networkError) Error() string        { return e.err.Error() }
func (e *networkError) Unwrap() error        { return e.err }
func (e *networkError) Is(target error) bool { return target == e.kind }

// classifyNetworkError marks err with ErrSubnetTaken or ErrNoAddressPool
// when the engine's message says so.
func classifyNetworkError(err error) error {
	msg := strings.ToLower(err.Error())
	for kind, words := range map[error][]string{ErrSubnetTaken: overlapMessages, ErrNoAddressPool: exhaustedMessages} {
		for _, w := range words {
			if strings.Contains(msg, w) {
				return &networkError{kind: kind, err: err}
			}
		}
	}
	return err
}

// CreateNetwork creates a bridge network, on n.Subnet when set. A refusal
// because of the address is wrapped with [ErrSubnetTaken] or
// [ErrNoAddressPool].
func (c *Client) CreateNetwork(ctx context.Context, n NetworkSpec) (string, error) {
	ipam, err := networkIPAM(n)
	if err != nil {
		return "", err
	}
	res, err := c.api.NetworkCreate(ctx, n.Name, client.NetworkCreateOptions{
		Driver: "bridge", Internal: n.Internal, Labels: n.Labels, Options: n.Options, IPAM: ipam,
	})
	if err != nil {
		return "", fmt.Errorf("creating network %s: %w", n.Name, classifyNetworkError(err))
	}
	return res.ID, nil
}

// networkIPAM is the network's address configuration, or nil for the engine's
// default pools.
func networkIPAM(n NetworkSpec) (*network.IPAM, error) {
	if n.Subnet == "" {
		return nil, nil
	}
	sub, err := netip.ParsePrefix(n.Subnet)
	if err != nil {
		return nil, fmt.Errorf("creating network %s: subnet: %w", n.Name, err)
	}
	cfg := network.IPAMConfig{Subnet: sub}
	if n.Gateway != "" {
		if cfg.Gateway, err = netip.ParseAddr(n.Gateway); err != nil {
			return nil, fmt.Errorf("creating network %s: gateway: %w", n.Name, err)
		}
	}
	return &network.IPAM{Driver: "default", Config: []network.IPAMConfig{cfg}}, nil
}

// RemoveNetwork removes a network; one already gone is not an error. A
// network that still has endpoints (a container the engine is still
// detaching, or one a user attached) is retried for a few seconds before
// the error stands.
func (c *Client) RemoveNetwork(ctx context.Context, id string) error {
	deadline := time.Now().Add(networkBusyRetry)
	for {
		_, err := c.api.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
		if err == nil || IsNotFound(err) {
			return nil
		}
		if !strings.Contains(err.Error(), "active endpoints") || time.Now().After(deadline) {
			return fmt.Errorf("removing network %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("removing network %s: %w", id, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// networkBusyRetry is how long RemoveNetwork retries a network that still
// has active endpoints.
const networkBusyRetry = 10 * time.Second

// ListNetworks lists networks carrying labels (every network when labels
// is empty), with their IPv4 and IPv6 subnets.
func (c *Client) ListNetworks(ctx context.Context, labels map[string]string) ([]Resource, error) {
	res, err := c.api.NetworkList(ctx, client.NetworkListOptions{Filters: labelFilters(labels)})
	if err != nil {
		return nil, fmt.Errorf("listing networks: %w", err)
	}
	out := make([]Resource, 0, len(res.Items))
	for _, it := range res.Items {
		r := Resource{ID: it.ID, Name: it.Name, Labels: it.Labels}
		for _, cfg := range it.IPAM.Config {
			if cfg.Subnet.IsValid() {
				r.Subnets = append(r.Subnets, cfg.Subnet.String())
			}
		}
		out = append(out, r)
	}
	return out, nil
}

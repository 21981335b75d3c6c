package dockerx

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"
)

// PullImage pulls ref from its registry and waits until it is complete.
// It is not part of [Engine]: only `run --image` pulls, and only when the
// image is missing and --pull allows it.
func (c *Client) PullImage(ctx context.Context, ref string) error {
	resp, err := c.api.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("pulling image %s: %w", ref, err)
	}
	defer resp.Close()
	if err := resp.Wait(ctx); err != nil {
		return fmt.Errorf("pulling image %s: %w", ref, err)
	}
	return nil
}

package main

import (
	"context"
	"io"

	"github.com/ontimehq/ontime/client"
)

// runGet: ontime get ID
func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return apiVerb(ctx, "get", args, stdout, stderr, func(ctx context.Context, c *client.Client, id string) (*client.Task, error) {
		return c.Get(ctx, id)
	})
}

// runCancel: ontime cancel ID
func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return apiVerb(ctx, "cancel", args, stdout, stderr, func(ctx context.Context, c *client.Client, id string) (*client.Task, error) {
		return c.Cancel(ctx, id)
	})
}

// runRequeue: ontime requeue ID (dead → pending)
func runRequeue(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return apiVerb(ctx, "requeue", args, stdout, stderr, func(ctx context.Context, c *client.Client, id string) (*client.Task, error) {
		return c.Requeue(ctx, id)
	})
}

package main

import (
	"context"
	"fmt"
	"io"
)

func runShard(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "ontime shard: not built yet")
	return 2
}

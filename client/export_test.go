package client

// Queued is how many Submits of c wait in its coalescer's queue.
func Queued(c *Client) int { return int(c.co.queued.Load()) }

package submit

// Queued reports how many submits wait for the next group commit of
// database db: tests gate a group and wait for the others to queue up.
func Queued(s *Service, db int) int {
	c := s.groups[db]
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

package ontime_test

import (
	"fmt"
	"time"

	"github.com/ontimehq/ontime"
	"github.com/ontimehq/ontime/internal/deliver/webhook"
)

// A receiver checks each call against the URL it gave ontime as the
// task's target; during a rotation it accepts the new and the old secret.
func ExampleVerifySignature() {
	const target = "https://shop.example/hooks/cancel"
	body := []byte(`{"id":"01jd5q5h0c8y2x4zv7m3n9p6rt","topic":"order.cancel","key":"order-42","payload":{"order":42},"due_at":"2026-11-23T18:00:00Z","attempt":1}`)
	now := time.Now()
	// What ontime sends, signed with the old secret while receivers move.
	header := webhook.Sign([]string{"old-secret"}, now, target, body, false)

	fmt.Println(ontime.VerifySignature(header, target, body, now, 5*time.Minute, "new-secret", "old-secret"))
	// The same call replayed at another receiver sharing the secret:
	err := ontime.VerifySignature(header, "https://billing.example/hooks/refund", body, now, 5*time.Minute, "new-secret", "old-secret")
	fmt.Println(err)
	// Output:
	// <nil>
	// bad webhook signature: no v2 signature matches
}

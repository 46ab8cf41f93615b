package punctual_test

// The tests talk to a real punctual and MariaDB that `npm run test:go` starts; they say so
// instead of failing obscurely when run without them.

import (
	"fmt"
	"os"
	"testing"

	punctual "github.com/punctual/punctual/clients/go"
)

var needed = []string{"PUNCTUAL_URL", "PUNCTUAL_TOKEN", "PUNCTUAL_WEBHOOK_SECRET", "PUNCTUAL_RECEIVER_URL", "PUNCTUAL_CONFORMANCE_CASES"}

func TestMain(m *testing.M) {
	for _, name := range needed {
		if os.Getenv(name) == "" {
			fmt.Fprintf(os.Stderr, "%s is not set: run these tests with `npm run test:go` from the project root\n", name)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

func env(name string) string { return os.Getenv(name) }

func newClient() *punctual.Client {
	return punctual.NewClient(env("PUNCTUAL_URL"), punctual.WithToken(env("PUNCTUAL_TOKEN")))
}

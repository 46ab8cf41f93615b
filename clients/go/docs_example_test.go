package punctual_test

// The Go example of docs/clients.md, run as written (in a main with the imports its prose names,
// the service's URL put in for the example's), built as a shop's module would build it: the close
// it creates is cancelled, the reset_membership task waiting for it is worked, and SIGTERM ends it
// with exit code 0.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	punctual "github.com/punctual/punctual/clients/go"
)

const exampleImports = `package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	punctual "github.com/punctual/punctual/clients/go"
)

func main() {
`

func docsExample(t *testing.T, heading, language string) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", "clients.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, found := strings.Cut(string(text), heading+"\n")
	if !found {
		t.Fatalf("docs/clients.md has no %q", heading)
	}
	_, block, found := strings.Cut(after, "```"+language+"\n")
	if !found {
		t.Fatalf("no %s block after %q", language, heading)
	}
	code, _, _ := strings.Cut(block, "\n```")
	return code
}

func TestTheDocsGoExampleCreatesCancelsAndWorksUntilSIGTERM(t *testing.T) {
	ctx := context.Background()
	client := newClient()
	member, _, err := client.Create(ctx, punctual.NewTask{Type: "reset_membership", Payload: map[string]any{"memberId": 42}})
	if err != nil {
		t.Fatal(err)
	}
	code := docsExample(t, "### In Go", "go")
	if lines := len(strings.Split(strings.TrimSpace(code), "\n")); lines > 10 {
		t.Fatalf("the example is to be short: %d lines", lines)
	}
	module, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":  "module example\n\ngo 1.19\n\nrequire github.com/punctual/punctual/clients/go v0.0.0\n\nreplace github.com/punctual/punctual/clients/go => " + module + "\n",
		"main.go": exampleImports + strings.ReplaceAll(code, "http://127.0.0.1:3000", env("PUNCTUAL_URL")) + "\n}\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", "example", ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the example does not build: %v\n%s\n%s", err, out, files["main.go"])
	}
	var output bytes.Buffer
	example := exec.Command(filepath.Join(dir, "example"))
	example.Stdout = &output
	if err := example.Start(); err != nil {
		t.Fatal(err)
	}
	defer example.Process.Kill() //nolint:errcheck // gone already when the test passed
	waitFor(t, 15*time.Second, "the example to work the reset_membership task", func() bool {
		task, err := client.Get(ctx, member.ID)
		return err == nil && task.Status == punctual.StatusDone
	})
	closed, err := client.GetByKey(ctx, "close_order:SN123")
	if err != nil || closed.Status != punctual.StatusCancelled {
		t.Fatalf("want the close cancelled: %+v, %v", closed, err)
	}
	if err := example.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- example.Wait() }()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the example did not end cleanly on SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the example did not stop on SIGTERM")
	}
	if !strings.Contains(output.String(), `reset member {"memberId":42}`) {
		t.Fatalf("the handler did not run: %q", output.String())
	}
}

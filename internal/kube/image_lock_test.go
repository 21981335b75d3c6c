package kube

import (
	"context"
	"testing"
	"time"
)

// TestLockImport: a second import into the same containerd waits for the
// first (containerd 1.6 fails concurrent imports of the same layers), and
// gives up when its context ends; another socket does not wait.
func TestLockImport(t *testing.T) {
	sock := "/run/test-" + t.Name() + ".sock"
	unlock, err := lockImport(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := lockImport(ctx, sock); err == nil {
		t.Fatal("a second import took the lock while the first held it")
	}
	other, err := lockImport(context.Background(), sock+".other")
	if err != nil {
		t.Fatalf("another socket's lock: %v", err)
	}
	other()
	got := make(chan error, 1)
	go func() {
		u, err := lockImport(context.Background(), sock)
		if err == nil {
			u()
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-got:
		t.Fatalf("the waiting import went on before the first released the lock (%v)", err)
	default:
	}
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting import never took the released lock")
	}
}

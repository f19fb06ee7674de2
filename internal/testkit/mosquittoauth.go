package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// StartMosquittoWithPassword runs mosquitto as StartMosquitto does, but
// refusing anonymous clients, with one account in a password file made by
// mosquitto_passwd.
func StartMosquittoWithPassword(t testing.TB, username, password string) *Mosquitto {
	t.Helper()
	passwd := RequireCommand(t, "mosquitto_passwd")
	// mosquitto started as root reads the file after it became the
	// mosquitto user, which cannot enter a test's temporary directory.
	dir, err := os.MkdirTemp("", "mosquitto-passwd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	file := filepath.Join(dir, "passwd")
	if out, err := exec.Command(passwd, "-b", "-c", file, username, password).CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_passwd: %v: %s", err, out)
	}
	for path, mode := range map[string]os.FileMode{dir: 0o755, file: 0o644} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	return StartMosquitto(t, "allow_anonymous false", "password_file "+file)
}

// Package dashboardtest holds what the dashboard's browser tests and
// bench/dashboard share: Debian's headless Chromium driven by chromedp, and a
// realistic fleet of Chef nodes and Ansible plays to show.
package dashboardtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/chromedp/chromedp"
)

// Chromium is the browser's path: $CHROMIUM, else Debian's chromium on $PATH.
func Chromium() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("chromium not found: install Debian's chromium package (scripts/test.sh does)")
}

// Browser starts headless Chromium with a fresh profile in userDataDir and
// returns a context for its first tab; cancel closes the browser. The flags
// are those this machine needs: no sandbox (tests run as root), no
// background networking (the network is closed), and no throttling of tabs
// in the background, since a test keeps one tab open per view.
func Browser(ctx context.Context, userDataDir string, width, height int) (context.Context, context.CancelFunc, error) {
	path, err := Chromium()
	if err != nil {
		return nil, nil, err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(userDataDir),
		chromedp.WindowSize(width, height),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("force-device-scale-factor", "1"),
		chromedp.Flag("hide-scrollbars", false),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	if err := chromedp.Do(tab); err != nil { // starts the browser
		cancelTab()
		cancelAlloc()
		return nil, nil, fmt.Errorf("start %s: %w", path, err)
	}
	return tab, func() { cancelTab(); cancelAlloc() }, nil
}

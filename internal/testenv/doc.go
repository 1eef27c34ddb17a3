// Package testenv starts the real external programs tandem's tests run
// against: OpenSSH sshd, headless Chromium.
package testenv

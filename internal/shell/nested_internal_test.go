package shell

import "testing"

// TestInteractiveShell: the command lines that start a shell of their
// own are told from those that run a script or a command.
func TestInteractiveShell(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"bash"}, "bash"},
		{[]string{"-bash"}, "bash"},
		{[]string{"/usr/bin/zsh", "-l"}, "zsh"},
		{[]string{"bash", "--rcfile", "x", "-i"}, "bash"},
		{[]string{"bash", "-o", "vi"}, "bash"},
		{[]string{"bash", "-i", "script.sh"}, "bash"},
		{[]string{"bash", "deploy.sh"}, ""},
		{[]string{"bash", "-c", "echo hi"}, ""},
		{[]string{"bash", "-lc", "echo hi"}, ""},
		{[]string{"sh", "-e", "build.sh"}, ""},
		{[]string{"su"}, "su"},
		{[]string{"su", "-"}, "su"},
		{[]string{"su", "-", "bob"}, "su"},
		{[]string{"su", "-l", "bob"}, "su"},
		{[]string{"su", "-s", "/bin/zsh", "bob"}, "su"},
		{[]string{"su", "-c", "id"}, ""},
		{[]string{"su", "bob", "-c", "id"}, ""},
		{[]string{"su", "--command=id"}, ""},
		{[]string{"sudo", "-i"}, "sudo -i"},
		{[]string{"sudo", "-u", "bob", "-i"}, "sudo -i"},
		{[]string{"sudo", "-s"}, "sudo -s"},
		{[]string{"sudo", "su", "-"}, "sudo su"},
		{[]string{"sudo", "-u", "bob", "bash"}, "sudo bash"},
		{[]string{"sudo", "apt", "install", "x"}, ""},
		{[]string{"sudo", "-i", "make"}, ""},
		{[]string{"sudo"}, ""},
		{[]string{"doas", "-s"}, "doas -s"},
		{[]string{"ssh", "otherhost"}, "ssh otherhost"},
		{[]string{"ssh", "-p", "2222", "-i", "key", "bob@h"}, "ssh bob@h"},
		{[]string{"ssh", "-p2222", "-oBatchMode=yes", "h"}, "ssh h"},
		{[]string{"ssh", "h", "uptime"}, ""},
		{[]string{"ssh", "-N", "-L", "8080:x:80", "h"}, ""},
		{[]string{"python3"}, ""},
		{[]string{"vim", "bash"}, ""},
		{nil, ""},
	}
	for _, tc := range tests {
		if got := interactiveShell(tc.argv); got != tc.want {
			t.Errorf("interactiveShell(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
}

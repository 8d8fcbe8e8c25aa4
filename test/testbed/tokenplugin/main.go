package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientauthenticationv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"k8s.io/client-go/tools/auth/exec"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tokenplugin:", err)
		os.Exit(1)
	}
}

func run() error {
	obj, _, err := exec.LoadExecCredentialFromEnv()
	if err != nil {
		return fmt.Errorf("KUBERNETES_EXEC_INFO: %w", err)
	}
	info, ok := obj.(*clientauthenticationv1.ExecCredential)
	if !ok {
		return fmt.Errorf("KUBERNETES_EXEC_INFO is a %T, not client.authentication.k8s.io/v1", obj)
	}
	if info.Spec.Cluster == nil || len(info.Spec.Cluster.Config.Raw) == 0 {
		return errors.New("no cluster config: set provideClusterInfo, and the profile's client.authentication.k8s.io/exec extension")
	}
	var config struct {
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(info.Spec.Cluster.Config.Raw, &config); err != nil {
		return fmt.Errorf("cluster config: %w", err)
	}
	ns, name, ok := strings.Cut(config.Secret, "/")
	if !ok {
		return fmt.Errorf("cluster config: secret %q is not namespace/name", config.Secret)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv("TOKENPLUGIN_KUBECONFIG"))
	if err != nil {
		return fmt.Errorf("$TOKENPLUGIN_KUBECONFIG: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	secret, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	token := secret.Data["token"]
	if len(token) == 0 {
		return fmt.Errorf("secret %s has no token", config.Secret)
	}
	if path := os.Getenv("TOKENPLUGIN_LOG"); path != "" {
		if err := appendLine(path, info.Spec.Cluster.Server+" "+config.Secret+" args="+strings.Join(os.Args[1:], ",")); err != nil {
			return err
		}
	}
	out := clientauthenticationv1.ExecCredential{
		TypeMeta: metav1.TypeMeta{APIVersion: clientauthenticationv1.SchemeGroupVersion.String(), Kind: "ExecCredential"},
		Status:   &clientauthenticationv1.ExecCredentialStatus{Token: string(token)},
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	return errors.Join(err, f.Close())
}

package crictl

import (
	"bufio"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// pullFlags are the credentials and deadline flags of pull, create and run.
type pullFlags struct {
	creds, auth, username string
	timeout               time.Duration
	annotations           map[string]string // pull only: --annotation
	// in is where the password for --username is read from: a terminal without echo, else its
	// first line.
	in io.Reader
	// prompt is where "Enter Password:" goes.
	prompt io.Writer
}

func (f *pullFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.creds, "creds", "", "use USERNAME[:PASSWORD] for accessing the registry")
	fl.StringVar(&f.auth, "auth", "", "use AUTH_STRING (base64 of USERNAME[:PASSWORD]) for accessing the registry")
	fl.StringVarP(&f.username, "username", "u", "", "use USERNAME for accessing the registry; the password is asked for on the terminal (or read from the first line of stdin)")
	fl.DurationVar(&f.timeout, "pull-timeout", 0, "maximum time to be used for pulling the image; 0 disables it")
	withEnv(fl, "creds", "CRICTL_CREDS")
	withEnv(fl, "auth", "CRICTL_AUTH")
	withEnv(fl, "pull-timeout", "CRICTL_PULL_TIMEOUT")
	longAlias(fl, "pull-timeout", "pt")
}

// authConfig turns --username (with the password asked for), --creds or --auth into a CRI AuthConfig
// (nil when none is set). --username wins over the other two, as upstream.
func (f *pullFlags) authConfig() (*runtimeapi.AuthConfig, error) {
	if f.username != "" {
		pass, err := readPassword(f.in, f.prompt)
		if err != nil {
			return nil, fmt.Errorf("--username %s: reading the password: %w", f.username, err)
		}
		return &runtimeapi.AuthConfig{Username: f.username, Password: pass}, nil
	}
	if f.creds != "" && f.auth != "" {
		return nil, errors.New("--creds and --auth are mutually exclusive")
	}
	creds := f.creds
	if f.auth != "" {
		b, err := base64.StdEncoding.DecodeString(f.auth)
		if err != nil {
			return nil, fmt.Errorf("--auth: not base64: %w", err)
		}
		creds = string(b)
	}
	if creds == "" {
		return nil, nil
	}
	user, pass, _ := strings.Cut(creds, ":")
	if user == "" {
		return nil, errors.New("credentials: username can't be empty")
	}
	return &runtimeapi.AuthConfig{Username: user, Password: pass}, nil
}

// readPassword prints "Enter Password:" to prompt and reads a password from in: without echo when in
// is a terminal, else its first line (so scripts can pipe it in).
func readPassword(in io.Reader, prompt io.Writer) (string, error) {
	if in == nil {
		return "", errors.New("no standard input")
	}
	fmt.Fprint(prompt, "Enter Password:")
	defer fmt.Fprintln(prompt)
	if f, ok := in.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		b, err := term.ReadPassword(int(f.Fd()))
		return string(b), err
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && (!errors.Is(err, io.EOF) || line == "") {
		if errors.Is(err, io.EOF) {
			return "", errors.New("standard input is empty")
		}
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// pullImage calls PullImage and, when errOut is a terminal, shows a progress line with the elapsed time
// while the runtime pulls (CRI reports no byte counts, so time is the only progress there is).
// Progress goes to errOut.
func pullImage(c context.Context, img runtimeapi.ImageServiceClient, errOut io.Writer, ref string, f *pullFlags, pod *runtimeapi.PodSandboxConfig) (string, error) {
	auth, err := f.authConfig()
	if err != nil {
		return "", err
	}
	if f.timeout < 0 {
		return "", errors.New("--pull-timeout must not be negative")
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		c, cancel = context.WithTimeout(c, f.timeout)
		defer cancel()
	}
	stop := progress(errOut, fmt.Sprintf("Pulling %s", ref))
	r, err := img.PullImage(c, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref, Annotations: f.annotations}, Auth: auth, SandboxConfig: pod})
	stop(err == nil)
	if err != nil {
		return "", fmt.Errorf("pulling image %s: %w", ref, err)
	}
	return r.GetImageRef(), nil
}

// progress shows "msg … 3.2s" on w until the returned function is called; it is silent when w is not a
// terminal.
func progress(w io.Writer, msg string) func(ok bool) {
	if !isTerminal(w) {
		return func(bool) {}
	}
	start, done := time.Now(), make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				fmt.Fprintf(w, "\r%s … %.1fs", msg, time.Since(start).Seconds())
			}
		}
	}()
	return func(ok bool) {
		close(done)
		<-finished
		word := "done"
		if !ok {
			word = "failed"
		}
		fmt.Fprintf(w, "\r%s … %s in %.1fs\n", msg, word, time.Since(start).Seconds())
	}
}

// isTerminal reports whether w is a terminal (progress output is drawn only there).
func isTerminal(w any) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// pullOptions are the options of pull.
type pullOptions struct {
	pullFlags
	ref, podConfig string
	annotationArgs []string
}

// pullCommand pulls an image through the CRI ImageService.
func (a *app) pullCommand() *cobra.Command {
	var o pullOptions
	cmd := &cobra.Command{
		Use:   "pull NAME[:TAG|@DIGEST]",
		Short: "Pull an image from a registry",
		Args:  cobra.ExactArgs(1),
		RunE: a.runE(func(c context.Context, cl criClient, args []string) error {
			o.ref = args[0]
			o.in, o.prompt = a.in, a.errOut
			return o.run(c, cl, a.streams)
		}),
	}
	o.pullFlags.add(cmd)
	cmd.Flags().StringVar(&o.podConfig, "pod-config", "", "use pod-config.[json|yaml] to override the pull context")
	cmd.Flags().StringArrayVarP(&o.annotationArgs, "annotation", "a", nil, "annotation key=value to be set on the pulled image")
	cmd.AddCommand(a.jsonschemaCommand(false))
	return cmd
}

// run pulls the image and prints "Image is up to date for REF".
func (o *pullOptions) run(c context.Context, cl criClient, s streams) error {
	var pod *runtimeapi.PodSandboxConfig
	if o.podConfig != "" {
		var err error
		if pod, err = loadPodSandboxConfig(o.podConfig); err != nil {
			return err
		}
	}
	var err error
	if o.pullFlags.annotations, err = (&listFlags{labels: o.annotationArgs}).labelSelector(); err != nil {
		return fmt.Errorf("--annotation: %w", err)
	}
	ref, err := pullImage(c, cl.img, s.errOut, o.ref, &o.pullFlags, pod)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "Image is up to date for %s\n", ref)
	return nil
}

// repoTagPairs splits an image's repo tags into (repository, tag) rows; an untagged image shows its
// digest repository and "<none>".
func repoTagPairs(tags []string, repo string) [][2]string {
	if len(tags) == 0 {
		return [][2]string{{repo, "<none>"}}
	}
	var out [][2]string
	for _, t := range tags {
		i := strings.LastIndex(t, ":")
		if i < 0 {
			out = append(out, [2]string{"errorRepoTag", "errorRepoTag"})
			continue
		}
		name := t[:i]
		if name == "<none>" {
			name = repo
		}
		out = append(out, [2]string{name, t[i+1:]})
	}
	return out
}

// repoDigest splits an image's first repo digest into repository and digest ("<none>" when absent).
func repoDigest(digests []string) (repo, digest string) {
	if len(digests) == 0 {
		return "<none>", "<none>"
	}
	r, d, ok := strings.Cut(digests[0], "@")
	if !ok {
		return "errorName", "errorRepoDigest"
	}
	return r, d
}

// imagesOptions are the options of images.
type imagesOptions struct {
	ref                                      string
	verbose, quiet, digests, noTrunc, pinned bool
	output                                   string
	filters                                  []string
}

// imagesCommand lists images: table columns IMAGE, TAG, [DIGEST], IMAGE ID, SIZE, [PINNED]; or -q IDs,
// -v details, -o json|yaml (a ListImagesResponse).
func (a *app) imagesCommand() *cobra.Command {
	var o imagesOptions
	cmd := &cobra.Command{
		Use:     "images [REPOSITORY[:TAG]]",
		Aliases: []string{"image", "img"},
		Short:   "List images",
		Args:    cobra.MaximumNArgs(1),
		RunE: a.runE(func(c context.Context, cl criClient, args []string) error {
			o.ref = optionalArg(args)
			return o.run(c, cl, a.out)
		}),
	}
	fl := cmd.Flags()
	fl.BoolVarP(&o.verbose, "verbose", "v", false, "show verbose info for images")
	fl.BoolVarP(&o.quiet, "quiet", "q", false, "only show image IDs")
	fl.StringVarP(&o.output, "output", "o", formatTable, "output format, one of: json|yaml|table")
	fl.BoolVar(&o.digests, "digests", false, "show digests")
	fl.BoolVar(&o.noTrunc, "no-trunc", false, "show output without truncating the ID")
	fl.BoolVar(&o.pinned, "pinned", false, "show whether the image is pinned or not")
	addImageFilter(fl, &o.filters)
	return cmd
}

// addImageFilter adds the --filter/-f flag of images and inspecti.
func addImageFilter(fl *pflag.FlagSet, filters *[]string) {
	fl.StringArrayVarP(filters, "filter", "f", nil, "filter output (repeatable): dangling=true|false, reference=REGEXP, before=IMAGE, since=IMAGE")
}

// run lists the images (those ref names, when set) the filters keep and prints them.
func (o *imagesOptions) run(c context.Context, cl criClient, out io.Writer) error {
	if err := checkFormat(o.output, formatTable, formatJSON, formatYAML); err != nil {
		return err
	}
	imgs, err := listImages(c, cl.img, o.ref, o.filters)
	if err != nil {
		return err
	}
	if o.output != formatTable {
		return printProto(out, &runtimeapi.ListImagesResponse{Images: imgs}, o.output)
	}
	return o.print(out, imgs)
}

// listImages lists the images ref names (all when empty) that the --filter conditions keep, sorted as
// upstream lists them.
func listImages(c context.Context, img runtimeapi.ImageServiceClient, ref string, filters []string) ([]*runtimeapi.Image, error) {
	req := &runtimeapi.ListImagesRequest{}
	if ref != "" {
		req.Filter = &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: ref}}
	}
	r, err := img.ListImages(c, req)
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	imgs := r.GetImages()
	if ref != "" {
		// Some runtimes (containerd 1.6) ignore the filter; apply it here too.
		imgs = slices.DeleteFunc(imgs, func(im *runtimeapi.Image) bool { return !imageMatches(im, ref) })
	}
	sortImages(imgs)
	return filterImages(imgs, filters)
}

// imageMatches reports whether ref names im: its ID (or an ID prefix of at least 3 hex characters), one
// of its repo tags or digests, or a repository whose tag is left out.
func imageMatches(im *runtimeapi.Image, ref string) bool {
	id := strings.TrimPrefix(im.GetId(), "sha256:")
	if r := strings.TrimPrefix(ref, "sha256:"); im.GetId() == ref || (len(r) >= 3 && strings.HasPrefix(id, r)) {
		return true
	}
	for _, name := range append(slices.Clone(im.GetRepoTags()), im.GetRepoDigests()...) {
		repo := name
		if i := strings.LastIndexAny(name, ":@"); i > strings.LastIndex(name, "/") {
			repo = name[:i]
		}
		if name == ref || repo == ref {
			return true
		}
	}
	return false
}

// filterImages applies upstream's --filter conditions to a sorted image list: dangling=true|false (no
// repo tags or some), reference=REGEXP (a repo tag or repo digest matches), before=IMAGE and since=IMAGE
// (the images listed after, respectively before, IMAGE; IMAGE by name, tag, digest or ID prefix).
func filterImages(imgs []*runtimeapi.Image, filters []string) ([]*runtimeapi.Image, error) {
	for _, f := range filters {
		key, val, _ := strings.Cut(f, "=")
		switch key {
		case "dangling":
			dangling, err := strconv.ParseBool(val)
			if err != nil {
				return nil, fmt.Errorf("--filter %s: want dangling=true or dangling=false", f)
			}
			imgs = slices.DeleteFunc(imgs, func(im *runtimeapi.Image) bool { return (len(im.GetRepoTags()) == 0) != dangling })
		case "reference":
			re, err := regexp.Compile(val)
			if err != nil {
				return nil, fmt.Errorf("--filter %s: %w", f, err)
			}
			imgs = slices.DeleteFunc(imgs, func(im *runtimeapi.Image) bool {
				return !slices.ContainsFunc(append(slices.Clone(im.GetRepoTags()), im.GetRepoDigests()...), re.MatchString)
			})
		case "before", "since":
			i := slices.IndexFunc(imgs, func(im *runtimeapi.Image) bool { return imageMatches(im, val) })
			if i < 0 {
				return nil, fmt.Errorf("--filter %s: no image %q", f, val)
			}
			if key == "before" {
				imgs = imgs[i+1:]
			} else {
				imgs = imgs[:i]
			}
		default:
			return nil, fmt.Errorf("--filter %q: unknown filter, want dangling=, reference=, before= or since=", f)
		}
	}
	return imgs, nil
}

// sortImages orders images by first repo tag, then first digest, then ID, as upstream lists them.
func sortImages(imgs []*runtimeapi.Image) {
	slices.SortStableFunc(imgs, func(a, b *runtimeapi.Image) int {
		if len(a.GetRepoTags()) > 0 && len(b.GetRepoTags()) > 0 {
			return cmp.Compare(a.GetRepoTags()[0], b.GetRepoTags()[0])
		}
		if len(a.GetRepoDigests()) > 0 && len(b.GetRepoDigests()) > 0 {
			return cmp.Compare(a.GetRepoDigests()[0], b.GetRepoDigests()[0])
		}
		return cmp.Compare(a.GetId(), b.GetId())
	})
}

func (o *imagesOptions) print(out io.Writer, images []*runtimeapi.Image) error {
	if o.quiet {
		for _, im := range images {
			fmt.Fprintln(out, im.GetId())
		}
		return nil
	}
	if o.verbose {
		for _, im := range images {
			fmt.Fprintf(out, "ID: %s\n", im.GetId())
			for _, t := range im.GetRepoTags() {
				fmt.Fprintf(out, "RepoTags: %s\n", t)
			}
			for _, d := range im.GetRepoDigests() {
				fmt.Fprintf(out, "RepoDigests: %s\n", d)
			}
			if im.GetSize() != 0 {
				fmt.Fprintf(out, "Size: %d\n", im.GetSize())
			}
			if im.GetUid() != nil {
				fmt.Fprintf(out, "Uid: %v\n", im.GetUid())
			}
			printIf(out, "Username", im.GetUsername())
			if im.GetPinned() {
				fmt.Fprintf(out, "Pinned: %v\n", im.GetPinned())
			}
			fmt.Fprintln(out)
		}
		return nil
	}
	t := newTable(out)
	header := []string{colImage, colTag}
	if o.digests {
		header = append(header, colDigest)
	}
	header = append(header, colImageID, colSize)
	if o.pinned {
		header = append(header, colPinned)
	}
	t.row(header...)
	for _, im := range images {
		repo, digest := repoDigest(im.GetRepoDigests())
		id := im.GetId()
		if !o.noTrunc {
			id, digest = truncateID(id, "sha256:"), truncateID(digest, "sha256:")
		}
		size := humanSize(float64(im.GetSize()), 3)
		for _, rt := range repoTagPairs(im.GetRepoTags(), repo) {
			row := []string{rt[0], rt[1]}
			if o.digests {
				row = append(row, digest)
			}
			row = append(row, id, size)
			if o.pinned {
				row = append(row, strconv.FormatBool(im.GetPinned()))
			}
			t.row(row...)
		}
	}
	return t.flush()
}

// inspectiOptions are the options of inspecti: the images by reference or ID, or else those --name
// and --filter select.
type inspectiOptions struct {
	statusFlags
	refs    []string
	name    string
	filters []string
}

// inspectiCommand prints the ImageStatus of images named by reference or ID, or of those the filters
// select.
func (a *app) inspectiCommand() *cobra.Command {
	var o inspectiOptions
	cmd := &cobra.Command{
		Use:   "inspecti [IMAGE-ID...]",
		Short: "Return the status of one or more images",
		RunE: a.runE(func(c context.Context, cl criClient, args []string) error {
			o.refs = args
			return o.run(c, cl, a.out)
		}),
	}
	o.statusFlags.add(cmd, formatJSON, "json|yaml|go-template|table")
	cmd.Flags().StringVar(&o.name, "name", "", "without IMAGE-IDs: the images of this name (repository[:tag])")
	addImageFilter(cmd.Flags(), &o.filters)
	return cmd
}

// run prints the status of each image named in refs, or of each image the filters select.
func (o *inspectiOptions) run(c context.Context, cl criClient, out io.Writer) error {
	if err := checkFormat(o.output, formatJSON, formatYAML, formatGoTemplate, formatTable); err != nil {
		return err
	}
	refs := o.refs
	if len(refs) == 0 {
		imgs, err := listImages(c, cl.img, o.name, o.filters)
		if err != nil {
			return err
		}
		refs = idsOf(imgs)
		if len(refs) == 0 {
			return errors.New("inspecti: no IMAGE-IDs given and no image matches --name and --filter")
		}
	}
	return printInspected(out, &o.statusFlags, refs, func(ref string) (inspected, error) {
		r, err := cl.img.ImageStatus(c, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}, Verbose: !o.quiet})
		if err != nil {
			return inspected{}, fmt.Errorf("image status of %q: %w", ref, err)
		}
		if r.GetImage() == nil {
			return inspected{}, fmt.Errorf("no such image %q", ref)
		}
		return inspected{
			table: func(out io.Writer) { printImageStatus(out, r, !o.quiet) },
			doc:   statusDoc{status: r.GetImage(), info: r.GetInfo()},
		}, nil
	})
}

func printImageStatus(out io.Writer, r *runtimeapi.ImageStatusResponse, verbose bool) {
	im := r.GetImage()
	fmt.Fprintf(out, "ID: %s\n", im.GetId())
	for _, t := range im.GetRepoTags() {
		fmt.Fprintf(out, "Tag: %s\n", t)
	}
	for _, d := range im.GetRepoDigests() {
		fmt.Fprintf(out, "Digest: %s\n", d)
	}
	fmt.Fprintf(out, "Size: %s\n", humanSize(float64(im.GetSize()), 3))
	if verbose {
		fmt.Fprintf(out, "Info: %v\n", r.GetInfo())
	}
}

// rmiOptions are the options of rmi: images by reference or ID, all of them, or the unused ones.
type rmiOptions struct {
	refs       []string
	all, prune bool
}

// rmiCommand removes images by reference or ID; -a removes all, --prune those no container uses
// (pinned images are kept).
func (a *app) rmiCommand() *cobra.Command {
	var o rmiOptions
	cmd := &cobra.Command{
		Use:   "rmi IMAGE-ID [IMAGE-ID...]",
		Short: "Remove one or more images",
		RunE: a.runE(func(c context.Context, cl criClient, args []string) error {
			o.refs = args
			return o.run(c, cl, a.streams)
		}),
	}
	cmd.Flags().BoolVarP(&o.all, "all", "a", false, "remove all images")
	cmd.Flags().BoolVarP(&o.prune, "prune", "q", false, "remove all unused images")
	return cmd
}

// run removes the selected images in ID order, reporting all failures together.
func (o *rmiOptions) run(c context.Context, cl criClient, s streams) error {
	if len(o.refs) == 0 && !o.all && !o.prune {
		return errors.New("rmi: give IMAGE-IDs, --all or --prune")
	}
	remove := map[string]bool{}
	for _, id := range o.refs {
		remove[id] = true
	}
	if o.all || o.prune {
		r, err := cl.img.ListImages(c, &runtimeapi.ListImagesRequest{})
		if err != nil {
			return err
		}
		for _, im := range r.GetImages() {
			if o.prune && im.GetPinned() {
				continue
			}
			remove[im.GetId()] = true
		}
	}
	if o.prune {
		ctrs, err := cl.rt.ListContainers(c, &runtimeapi.ListContainersRequest{})
		if err != nil {
			return err
		}
		for _, ctr := range ctrs.GetContainers() {
			st, err := cl.img.ImageStatus(c, &runtimeapi.ImageStatusRequest{Image: ctr.GetImage()})
			if err != nil || st.GetImage() == nil {
				continue
			}
			remove[st.GetImage().GetId()] = false
		}
	}
	ids := make([]string, 0, len(remove))
	for id, ok := range remove {
		if ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return removeEach(s.errOut, ids, "No images to remove", func(id string) error { return o.remove(c, cl.img, id, s.out) })
}

func (o *rmiOptions) remove(c context.Context, img runtimeapi.ImageServiceClient, ref string, out io.Writer) error {
	st, err := img.ImageStatus(c, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		return fmt.Errorf("image status of %q: %w", ref, err)
	}
	if st.GetImage() == nil {
		return fmt.Errorf("no such image %s", ref)
	}
	if _, err := img.RemoveImage(c, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		if o.prune { // another client may have removed it meanwhile
			return nil
		}
		return fmt.Errorf("removing image %q: %w", ref, err)
	}
	names := st.GetImage().GetRepoTags()
	if len(names) == 0 {
		names = st.GetImage().GetRepoDigests()
	}
	for _, n := range names {
		fmt.Fprintf(out, "Deleted: %s\n", n)
	}
	return nil
}

// imagefsinfoCommand prints the ImageFsInfo answer (image and container filesystems' usage).
func (a *app) imagefsinfoCommand() *cobra.Command {
	var o statusFlags
	cmd := &cobra.Command{
		Use:   "imagefsinfo",
		Short: "Return image filesystem info",
		Args:  cobra.NoArgs,
		RunE: a.runE(func(c context.Context, cl criClient, _ []string) error {
			return imageFsInfo(c, cl, &o, a.out)
		}),
	}
	o.add(cmd, formatJSON, "json|yaml|go-template|table")
	return cmd
}

// imageFsInfo prints the usage of the runtime's container and image filesystems.
func imageFsInfo(c context.Context, cl criClient, o *statusFlags, out io.Writer) error {
	if err := checkFormat(o.output, formatJSON, formatYAML, formatGoTemplate, formatTable); err != nil {
		return err
	}
	r, err := cl.img.ImageFsInfo(c, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return fmt.Errorf("image filesystem info request: %w", err)
	}
	if o.output != formatTable {
		return printStatus(out, []statusDoc{{status: r}}, o.output, o.template)
	}
	for _, g := range []struct {
		label string
		fs    []*runtimeapi.FilesystemUsage
	}{{"Container", r.GetContainerFilesystems()}, {"Image", r.GetImageFilesystems()}} {
		fmt.Fprintf(out, "%s Filesystem \n", g.label)
		for i, u := range g.fs {
			fmt.Fprintf(out, "TimeStamp[%d]: %d\nDisk[%d]: %s\nInodes[%d]: %d\nMountpoint[%d]: %s\n",
				i, u.GetTimestamp(), i, humanSize(float64(u.GetUsedBytes().GetValue()), 4),
				i, u.GetInodesUsed().GetValue(), i, u.GetFsId().GetMountpoint())
		}
	}
	return nil
}

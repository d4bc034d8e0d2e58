# docs_test.rb: the man page, the bash completion and the README's options table say what `tracer
# --help` says, the README's and docs/'s links lead somewhere, and make install installs.
require_relative 'helper'
require 'fileutils'
require 'set'

MAN_PAGE = File.join(ROOT, 'client', 'tracer.1')
COMPLETION = File.join(ROOT, 'client', 'tracer.bash-completion')

class DocsTest < Minitest::Test
  include TracerTest

  def help
    @help ||= begin
      out, _, status = tracer('--help')
      assert status.success?
      out
    end
  end

  # The lines of one section of the help: from its title to the next blank line.
  def help_section(title)
    help[/^#{Regexp.escape(title)}\n(.*?)(?:\n\n|\z)/m, 1] or flunk("no #{title} in --help")
  end

  # {"--pid" => "-p", "--ps" => nil, ...} from the Options section of --help.
  def help_options
    help_section('Options:').lines.to_h do |l|
      m = l.match(/\A  (?:(-\w), )?\s*(--[\w-]+)/) or flunk("odd option line: #{l}")
      [m[2], m[1]]
    end
  end

  # The same from the OPTIONS section of the man page's source: each .TP tag names an option.
  def man_options
    roff = File.read(MAN_PAGE)
    section = roff[/^\.SH OPTIONS\n(.*?)^\.SH /m, 1] or flunk('no OPTIONS section in tracer.1')
    tags = section.scan(/^\.TP\n(.*)$/).flatten.map { |t| t.gsub('\\-', '-') }
    tags.select { |t| t =~ /\A\.B[IR]? -/ }.to_h do |t|
      long = t[/--[\w-]+/] or flunk("no long option in #{t}")
      [long, t[/(?<![\w-])-\w\b/]]
    end
  end

  def test_every_option_of_the_help_is_in_the_man_page_and_back
    help_opts = help_options
    man_opts = man_options
    assert_operator help_opts.size, :>=, 26
    assert_equal help_opts.keys.sort, man_opts.keys.sort, 'options in --help vs tracer.1'
    assert_equal help_opts.sort, man_opts.sort, 'short forms in --help vs tracer.1'
  end

  def test_man_page_has_its_sections
    roff = File.read(MAN_PAGE)
    ['NAME', 'SYNOPSIS', 'DESCRIPTION', 'OPTIONS', '"METHOD SPECS"', 'OUTPUT', '"EXIT STATUS"',
     'ENVIRONMENT', 'FILES', 'SECURITY', 'EXAMPLES', '"SEE ALSO"'].each do |s|
      assert_match(/^\.SH #{s}$/, roff)
    end
    help_section('Exit codes:').scan(/^  (\d)  /).flatten.each do |code|
      assert_match(/^\.TP\n\.B #{code}\n/, roff, "exit code #{code}")
    end
    %w[TMPDIR COLUMNS TRACER_AGENT_EVAL].each { |v| assert_match(/^\.BR? #{v}\b/, roff) }
    help_section('Trace formats (--format, for -m, -f and -s):').scan(/^  (\w+)/).flatten.each do |f|
      assert_match(/^\.TP\n\.B #{f}\n/, roff, "format #{f} in OUTPUT")
    end
  end

  # Each option the README's options table names is one of tracer's.
  def test_readme_options_are_the_clients
    rows = readme_option_rows
    assert_operator rows.size, :>=, 20, 'no options table in README.md'
    named = rows.flat_map { |r| r.split(' | ').first.scan(/`(--?[\w-]+)/).flatten }
    known = help_options.flat_map { |long, short| [long, short].compact }
    assert_empty named - known, 'options in README.md that tracer --help does not have'
  end

  # The rows of the README's options table.
  def readme_option_rows
    File.read(File.join(ROOT, 'README.md')).lines.grep(/\A\| `-/)
  end

  # Every option and short form in the code spans of some text: `--rows N`, `-t`, `--split process|thread`.
  def options_named(text)
    text.scan(/`([^`]*)`/).flatten.flat_map { |code| code.scan(/(?<![\w-])--?[a-z][\w-]*/) }.to_set
  end

  # The modes of --help's table, which TRC_TOP_MODES makes (test_completion_of_top_modes_and_formats
  # holds the two together).
  def top_modes
    help_section('Live tables (--top MODE), counted inside the processes:').scan(/^  ([\w-]+) /).flatten
  end

  # A user reads the README's options table for what tracer can do: each option of --help is in it
  # (by its long or short form), as is each --top mode in the --top row; the Live tables section
  # names each mode too.
  def test_readme_names_every_option_and_top_mode
    rows = readme_option_rows
    named = options_named(rows.join)
    missing = help_options.reject { |long, short| [long, short].compact.any? { |o| named.include?(o) } }
    assert_empty missing.keys, "options of tracer --help that README.md's options table does not name"
    top_row = rows.find { |r| r.start_with?('| `--top MODE`') } or flunk('no --top MODE row in README.md')
    modes_in_row = top_row.split(' | ', 2).last.scan(/`([\w-]+)`/).flatten
    assert_empty top_modes - modes_in_row, "--top modes README.md's --top row does not name"
    readme = File.read(File.join(ROOT, 'README.md'))
    section = readme[/^### Live tables\n(.*?)^##/m, 1] or flunk('no Live tables section in README.md')
    modes_para = section[/^Modes: (.*?)\n\n/m, 1] or flunk('no "Modes:" paragraph in README.md')
    assert_empty top_modes - modes_para.scan(/`([\w-]+)`/).flatten, "--top modes README.md's Live tables do not list"
  end

  # The man page's --top lists each mode as a tag of its own.
  def test_man_page_names_every_top_mode
    roff = File.read(MAN_PAGE)
    list = roff[/^\.BI \\-\\-top " MODE"\n(.*?)^\.RE$/m, 1] or flunk('no --top MODE in tracer.1')
    tags = list.scan(/^\.TP(?: \d+)?\n\.B (.*)$/).flatten.map { |t| t.gsub('\\-', '-') }
    assert_operator top_modes.size, :>=, 9
    assert_equal top_modes, tags, "the --top modes of --help vs tracer.1"
  end

  # GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces as -.
  def anchor(heading) = heading.strip.downcase.gsub(/[^\w\- ]/, '').tr(' ', '-')

  # The README's and docs/'s relative links name files that exist, and headings that do.
  def test_links_lead_somewhere
    files = [File.join(ROOT, 'README.md')] + Dir[File.join(ROOT, 'docs', '*.md')]
    assert_operator files.size, :>=, 3
    files.each do |file|
      File.read(file).scan(/\]\(([^)\s]+)\)/).flatten.reject { |l| l.match?(%r{\A\w+://}) }.each do |link|
        path, frag = link.split('#', 2)
        target = path.empty? ? file : File.expand_path(path, File.dirname(file))
        assert File.exist?(target), "#{File.basename(file)}: #{link}: no #{target}"
        next unless frag && target.end_with?('.md')

        headings = File.read(target).scan(/^#+ (.*)$/).flatten.map { |h| anchor(h) }
        assert_includes headings, frag, "#{File.basename(file)}: #{link}: no such heading"
      end
    end
  end

  def test_man_page_renders_without_warnings
    skip 'man is not installed (apt-get install man-db groff-base)' unless system('command -v man >/dev/null')
    out, err, status = Open3.capture3({ 'MANWIDTH' => '80' }, 'man', '--warnings', '-l', MAN_PAGE)
    assert status.success?, err
    assert_empty err
    assert_match(/^SYNOPSIS/, out)
    assert_match(/--format FORMAT/, out)
  end

  # Runs the completion function as bash would for the words given (the last one being
  # completed) and returns the candidates.
  def complete(*words, script: COMPLETION)
    cmd = <<~SH
      source "$1"; shift
      COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
      _tracer
      printf '%s\\n' "${COMPREPLY[@]}"
    SH
    out, err, status = Open3.capture3('bash', '-c', cmd, 'bash', script, *words)
    assert status.success?, err
    out.lines(chomp: true).reject(&:empty?)
  end

  def test_completion_is_registered
    out, err, status = Open3.capture3('bash', '-c', 'source "$1" && complete -p tracer', 'bash', COMPLETION)
    assert status.success?, err
    assert_equal "complete -F _tracer tracer\n", out
  end

  def test_completion_offers_every_option_of_the_help
    expected = help_options.flat_map { |long, short| [long, short].compact }.sort
    assert_equal expected, complete('tracer', '-').sort
    assert_equal ['--format'], complete('tracer', '--form')
    assert_equal %w[--format --fork], complete('tracer', '--fo')
  end

  def test_completion_of_top_modes_and_formats
    modes = help_section('Live tables (--top MODE), counted inside the processes:').scan(/^  ([\w-]+) /).flatten
    protocol = File.read(File.join(ROOT, 'include', 'tracer_protocol.h'))
    assert_equal protocol.scan(/^\tX\(\w+, \d+, "([\w-]+)"/).flatten, modes, 'the modes of TRC_TOP_MODES'
    assert_equal modes, complete('tracer', '-p', '1', '--top', '')
    assert_equal %w[objects-total objects], complete('tracer', '--top', 'ob')
    formats = help_section('Trace formats (--format, for -m, -f and -s):').scan(/^  (\w+) /).flatten
    export_h = File.read(File.join(ROOT, 'client', 'export', 'export.h'))
    assert_equal export_h.scan(/^\tX\([A-Z]+, (\w+), /).flatten, formats, 'the formats of TRC_FORMATS'
    assert_equal formats, complete('tracer', '--format', '')
    assert_equal ['chrome'], complete('tracer', '--format', '=', 'ch')
    assert_equal formats, complete('tracer', '--format', '=')
  end

  def test_completion_of_pids_and_files
    ruby = spawn(RUBY, '-e', 'sleep')
    begin
      assert_includes complete('tracer', '-p', ''), ruby.to_s
      assert_includes complete('tracer', '--pid', ruby.to_s[0]), ruby.to_s
      # -p takes several: after a pid, another.
      assert_includes complete('tracer', '-p', '1', ''), ruby.to_s
      assert_includes complete('tracer', '-p', '1', '-'), '--top'
      refute_includes complete('tracer', '-e', '1', ''), ruby.to_s
    ensure
      Process.kill('KILL', ruby)
      Process.wait(ruby)
    end
    Dir.mktmpdir do |dir|
      FileUtils.touch(File.join(dir, 'trace one.json'))
      FileUtils.touch(File.join(dir, 'heap.json'))
      assert_equal ["#{dir}/heap.json", "#{dir}/trace one.json"], complete('tracer', '-o', "#{dir}/").sort
      assert_equal ["#{dir}/heap.json"], complete('tracer', '--heapdump', "#{dir}/h")
      assert_equal ["#{dir}/heap.json"], complete('tracer', '--shapesdump', "#{dir}/h")
    end
    assert_empty complete('tracer', '-e', '')
    assert_empty complete('tracer', '--backtrace', '')
    # The dumps' FILE may be left out: an option can follow.
    assert_includes complete('tracer', '--shapesdump', '--ti'), '--timeout'
  end

  def test_completion_of_tracers_and_commands
    tracer = File.join(ROOT, 'client', 'tracer') # its bundled tracers are found beside it
    assert_equal %w[activerecord], complete(tracer, '-c', 'act')
    assert_includes complete(tracer, '-p', '1', '--config', ''), 'threads'
    Dir.mktmpdir do |dir|
      FileUtils.touch(File.join(dir, 'mine.tracer'))
      assert_equal ["#{dir}/mine.tracer"], complete(tracer, '-c', "#{dir}/m")
      # After -x: a command, then its arguments (files without bash-completion), never ours.
      assert_includes complete('tracer', '-m', 'x', '-x', 'rub'), 'ruby'
      assert_equal ["#{dir}/mine.tracer"], complete('tracer', '-x', 'ruby', "#{dir}/m")
      refute_includes complete('tracer', '-x', 'ruby', '--'), '--pid'
    end
  end

  # systemd-analyze verify on an instance of the installed unit: its settings parse, its
  # ExecStart is an executable, its Documentation= man page is found (on MANPATH). It needs no
  # running systemd; the unit is never started here.
  def verify_unit(dir, manpath)
    skip 'systemd-analyze is not installed (apt-get install systemd)' unless system('command -v systemd-analyze >/dev/null')
    man = system('command -v man >/dev/null') ? [] : ['--man=no'] # no man-db: nothing to look it up with
    out, status = Open3.capture2e({ 'MANPATH' => manpath }, 'systemd-analyze', 'verify', *man,
                                  './tracer-metrics@deploy.service', chdir: dir)
    assert status.success?, out
    assert_equal '', out, 'systemd-analyze verify: nothing to say'
  end

  def test_make_install
    Dir.mktmpdir do |prefix|
      out, status = Open3.capture2e('make', '-s', '-C', File.join(ROOT, 'client'), 'install', "PREFIX=#{prefix}")
      assert status.success?, out
      bin = File.join(prefix, 'bin', 'tracer')
      man = File.join(prefix, 'share', 'man', 'man1', 'tracer.1')
      comp = File.join(prefix, 'share', 'bash-completion', 'completions', 'tracer')
      assert File.executable?(bin)
      assert_equal File.read(MAN_PAGE), File.read(man)
      assert_equal File.read(COMPLETION), File.read(comp)
      assert_match(/\Atracer \d+\.\d+\.\d+/, `#{bin} --version`)
      assert_equal %w[chrome], complete('tracer', '--format', 'ch', script: comp)
      # The bundled tracers, where the installed binary finds them.
      bundled = Dir[File.join(ROOT, 'share', 'tracer', 'tracers', '*.tracer')].map { |f| File.basename(f) }.sort
      assert_equal bundled, Dir.children(File.join(prefix, 'share', 'tracer', 'tracers')).sort
      out, status = Open3.capture2e(bin, '-c', 'nope', '-p', '1')
      assert_equal 2, status.exitstatus
      assert_match(/\(bundled: #{bundled.map { |f| File.basename(f, '.tracer') }.join(', ')}\)/, out)
      assert_equal %w[sleep], complete(bin, '-c', 'sl', script: comp)
      # The --metrics unit, running the tracer installed beside it.
      unit = File.read(File.join(prefix, 'lib', 'systemd', 'system', 'tracer-metrics@.service'))
      assert_match(/^ExecStart=#{Regexp.escape(bin)} --ps \$\{TRACER_PS\} --top \$\{TRACER_TOP\} --metrics /, unit)
      refute_includes unit, '@BINDIR@'
      verify_unit(File.join(prefix, 'lib', 'systemd', 'system'), File.join(prefix, 'share', 'man'))
    end
  end
end

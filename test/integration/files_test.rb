# files_test.rb: the files tracer writes (-o FILE, the dumps) on a full disk, at a name that is
# taken, and through a name another user planted.
require_relative 'helper'

class FilesTest < Minitest::Test
  include TracerTest

  # Runs tracer in a mount namespace of its own where dir is a 256 KiB tmpfs (with a file
  # holding "before\n" at the name before:, if given); returns [stdout, stderr, status, the files
  # left in dir (name => size)].
  def on_full_disk(dir, *args, before: nil)
    needs_root 'a tmpfs in a mount namespace of its own'
    script = 'mount -t tmpfs -o size=256k tmpfs "$0" || exit 99; ' \
             "#{before ? "echo before >\"$0/#{before}\"; " : ''}\"$@\"; rc=$?; " \
             'for f in "$0"/* "$0"/.[!.]*; do [ -e "$f" ] && echo "file ${f##*/} $(stat -c %s "$f")" >&2; done; exit $rc'
    out, err, status = tracer(*args, prefix: ['unshare', '-m', 'sh', '-c', script, dir])
    refute_equal 99, status.exitstatus, "no tmpfs: #{err}"
    files = err.scan(/^file (\S+) (\d+)$/).to_h { |n, s| [n, Integer(s)] }
    [out, err.gsub(/^file .*\n/, ''), status, files]
  end

  def test_heapdump_on_a_full_disk_fails_and_leaves_nothing
    t = target('sleep')
    Dir.mktmpdir do |dir|
      path = File.join(dir, 'heap.json')
      out, err, status, files = on_full_disk(dir, '-p', t.pid, '--heapdump', path)
      assert_equal 1, status.exitstatus, err
      assert_empty out
      assert_match(/^tracer: heap dump failed: '#{Regexp.escape(path)}' cannot be whole: No space left on device \(removed\)$/, err)
      assert_empty files, 'no dump, whole or partial'
    end
    assert t.alive?
  end

  # A trace to a file whose disk fills: the spool says it is cut short, and the run fails.
  def test_trace_on_a_full_disk_fails
    t = target('busy')
    Dir.mktmpdir do |dir|
      _, err, status, files = on_full_disk(dir, '-p', t.pid, '-m', 'Worker#work', '--duration', '1',
                                           '-o', File.join(dir, 'trace.txt'))
      assert_equal 1, status.exitstatus, err
      assert_match(/^\*\*\* the trace is cut short: .*No space left on device$/, err)
      assert_equal ['trace.txt'], files.keys, 'the partial trace keeps its name; no scratch file stays'
    end
  end

  # Files that are only good whole (a JSON document, a profile, a picture, stacks written at the
  # end) are not left at their name when the disk filled: they would look complete, and be
  # empty or short. What was there before stays as it was.
  def test_whole_files_on_a_full_disk_are_not_left
    t = target('busy')
    %w[chrome speedscope pprof flamegraph collapsed].each do |format|
      Dir.mktmpdir do |dir|
        path = File.join(dir, "trace.#{format}")
        _, err, status, files = on_full_disk(dir, '-p', t.pid, '-m', 'Worker#work', '--duration', '1',
                                             '--format', format, '-o', path, before: "trace.#{format}")
        assert_equal 1, status.exitstatus, "#{format}: #{err}"
        assert_match(/^\*\*\* the trace is cut short: .*No space left on device$/, err)
        assert_match(/^tracer: '#{Regexp.escape(path)}' not written: the trace was cut short; the incomplete #{format} file was removed$/, err)
        assert_equal({ "trace.#{format}" => 7 }, files, "#{format}: the file that was there, as it was")
      end
    end
    assert t.alive?
  end

  # A run that traced no process leaves no empty document that would look like a quiet app.
  def test_whole_file_of_no_process_is_not_left
    pid = spawn('sleep', '60')
    Dir.mktmpdir do |dir|
      path = File.join(dir, 'trace.svg')
      _, err, status = tracer('-p', pid, '-m', 'Worker#work', '--format', 'flamegraph', '-o', path)
      assert_equal 1, status.exitstatus, err
      assert_match(/^tracer: process #{pid} is no Ruby program/, err)
      assert_match(/^tracer: '#{Regexp.escape(path)}' not written: no process was traced; the incomplete flamegraph file was removed$/, err)
      assert_empty Dir.children(dir)
    end
  ensure
    Process.kill('KILL', pid)
    Process.wait(pid)
  end

  def test_output_on_a_full_disk_says_it_is_partial
    t = target('sleep')
    Dir.mktmpdir do |dir|
      path = File.join(dir, 'out.txt')
      _, err, status, files = on_full_disk(dir, '-p', t.pid, '-e', '"x" * 400_000', '-o', path)
      assert_equal 1, status.exitstatus, err
      assert_match(/^tracer: cannot write '#{Regexp.escape(path)}': No space left on device: the trace in it is partial$/, err)
      assert_equal ['out.txt'], files.keys
    end
  end

  # Another user made directories at the names the default --heapdump file would take: the
  # dump goes to a name beside them.
  def test_default_heapdump_name_taken_by_a_directory
    needs_root "directories of user nobody's"
    t = target('sleep')
    Dir.mktmpdir do |tmp|
      File.chmod(0o1777, tmp)
      now = Time.now
      taken = (-1..30).map { |s| File.join(tmp, "tracer-heap-#{t.pid}-#{(now + s).strftime('%Y%m%d-%H%M%S')}.json") }
      taken.each { |d| Dir.mkdir(d) && File.chown(Etc.getpwnam('nobody').uid, nil, d) }
      out, err, status = tracer('-p', t.pid, '--heapdump', env: { 'TMPDIR' => tmp })
      assert status.success?, err
      path = out[/\Aheap dump written to (\S+-1\.json) \(\d+ bytes\)\n\z/, 1] or flunk(out)
      assert_includes taken.map { |d| d.sub(/\.json\z/, '-1.json') }, path
      assert File.file?(path)
      assert File.directory?(path.sub(/-1\.json\z/, '.json')), 'the directory stays'
    end
  end

  # A world-writable sticky directory (/tmp) where another user planted the output's name as a
  # link to a file of root's: the link is replaced, the file it named is untouched.
  def test_output_does_not_follow_a_planted_link
    needs_root 'links planted as user nobody'
    t = target('sleep')
    Dir.mktmpdir do |top|
      File.chmod(0o755, top)
      shared = File.join(top, 'shared')
      Dir.mkdir(shared)
      File.chmod(0o1777, shared)
      victim = File.join(top, 'victim')
      File.write(victim, "precious\n")
      link = File.join(shared, 'trace.txt')
      system(*AS_NOBODY, 'ln', '-s', victim, link, exception: true)
      out, err, status = tracer('-p', t.pid, '-e', '1', '-o', link)
      assert status.success?, err
      assert_empty out
      assert_equal "precious\n", File.read(victim)
      refute File.symlink?(link)
      assert_equal "=> 1\n", File.read(link)
      assert_equal Process.euid, File.stat(link).uid
      # Appending would write through: refused, with the link left alone.
      system(*AS_NOBODY, 'ln', '-sf', victim, File.join(shared, 'again.txt'), exception: true)
      _, err, status = tracer('-p', t.pid, '-e', '2', '-o', File.join(shared, 'again.txt'), '-a')
      assert_equal 1, status.exitstatus
      assert_match(/is a symbolic link that belongs to another user: not appended to$/, err)
      assert_equal "precious\n", File.read(victim)
    end
  end
end

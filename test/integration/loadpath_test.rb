# loadpath_test.rb: tracer -p loads the agent into a process only along a path that nobody but
# root and the process's user can change, as the process itself resolves it (issue 43): a root
# process chrooted into another user's tree, or in a mount namespace where tracer's lib is
# bind-mounted under that user's directories, is refused before anything is written, and the
# user's rename that would swap the agent's files at the moment the process loads them gets no
# chance to run the user's code as root.
require_relative 'helper'

class LoadPathTest < Minitest::Test
  include TracerTest

  BARE = { 'RUBYOPT' => nil, 'TRACER_AGENT_INJECT' => nil }.freeze
  INSTEAD = "or have the app load the agent itself (require 'tracer_agent')"
  # The target: no file of ours, so that it runs where only tracer's lib is mounted in.
  TICKING = '$stdout.sync = true; puts "ready #{$$}"; loop { sleep 0.05 }' # rubocop:disable Lint/InterpolationCheck

  def setup
    super
    assert Process.uid.zero?, 'needs root: mount namespaces, a chroot and a throwaway user'
    @uid = throwaway_uid
    @dir = Dir.mktmpdir('tracer-loadpath')
    File.chmod(0o755, @dir)
    # The agent tracer loads (TRACER_AGENT_LIB): root's, in a root-owned directory, as it would be
    # installed; the process reaches it through whatever its view of the file system puts above.
    @lib = File.join(@dir, 'tree', 'lib')
    FileUtils.mkdir_p(File.dirname(@lib))
    FileUtils.cp_r(File.realpath(AGENT_LIB), @lib)
    FileUtils.chmod_R('go-w', @lib)
  end

  def teardown
    super
    @attacker&.then { |pid| Process.kill('KILL', pid) rescue nil; Process.wait(pid) rescue nil } # rubocop:disable Style/RescueModifier
    FileUtils.rm_rf(@dir)
  end

  # The issue's jail: a root process chrooted into a tree the throwaway user owns, the system's
  # directories and tracer's lib bind-mounted in (what tracer's own "mount the directory there"
  # advice leads to). Its / is the user's: refused, naming it and its owner.
  def test_chroot_into_another_users_tree
    jail = File.join(@dir, 'jail')
    Dir.mkdir(jail)
    binds = system_dirs.filter_map do |top|
      next File.symlink(File.readlink("/#{top}"), File.join(jail, top)) && nil if File.symlink?("/#{top}")

      Dir.mkdir(File.join(jail, top))
      top
    end
    FileUtils.mkdir_p(File.join(jail, @lib))
    chown_tree(jail)
    t = in_namespace(%(mount --bind "$LIB" "$JAIL$LIB" && for d in $BINDS; do mount --rbind "/$d" "$JAIL/$d"; done && exec chroot "$JAIL" "$@"),
                     'LIB' => @lib, 'JAIL' => jail, 'BINDS' => binds.join(' '))
    assert_refused(t, '/', ' (its root is not tracer\'s: a chroot or a container)')
  end

  # A mount namespace in which the directory above tracer's lib is the user's (their tree bind-
  # mounted there, tracer's lib bind-mounted inside it), and the user waiting to swap that tree
  # for one of their own (renameat2 RENAME_EXCHANGE) the moment the process opens
  # tracer_inject.so: before the fix, the process then required the user's tracer_agent.rb, as
  # root. Refused now, before anything is written: the swap never comes.
  def test_rename_race_under_a_bind_mount
    users = File.join(@dir, 'users')
    FileUtils.mkdir_p(File.join(users, 'tree', 'lib'))
    marker = File.join(Dir.tmpdir, "tracer-loadpath-ran-#{rand(1 << 40)}")
    FileUtils.mkdir_p(File.join(users, 'evil', 'lib', 'tracer_agent'))
    File.write(File.join(users, 'evil', 'lib', 'tracer_agent.rb'), "File.write(#{marker.inspect}, \"uid \#{Process.uid}\")\n")
    chown_tree(users)
    t = in_namespace('mount --bind "$LIB" "$USERS/tree/lib" && mount --rbind "$USERS" "$TOP" && exec "$@"',
                     'LIB' => @lib, 'USERS' => users, 'TOP' => @dir)
    assert_equal File.stat(File.join(@lib, 'tracer_agent.rb')).ino, File.stat("/proc/#{t.pid}/root#{@lib}/tracer_agent.rb").ino
    attacker = start_attacker(File.join(@lib, 'tracer_agent', 'tracer_inject.so'), File.join(users, 'tree'), File.join(users, 'evil'))
    assert_refused(t, @dir, '') do
      refute File.exist?(marker), -> { "the user's tracer_agent.rb ran in process #{t.pid}: #{File.read(marker)}" }
      assert_equal :wait_readable, attacker.read_nonblock(100, exception: false), 'the process opened tracer_inject.so'
    end
  ensure
    FileUtils.rm_f(marker) if marker
  end

  private

  def assert_refused(t, dir, view)
    _, err, status = tracer('-p', t.pid, '-e', '1', '--timeout', 5, env: { 'TRACER_AGENT_LIB' => @lib })
    yield if block_given?
    assert_equal 1, status.exitstatus, err
    assert_equal "tracer: process #{t.pid} would load the agent through #{dir}, which belongs to uid #{@uid} in its " \
                 "view of the file system#{view}, neither root nor the user of the process: that user could put " \
                 "code of their own there (by renaming what is in it) to run as the process's user; reach the " \
                 "agent there only through directories of root's (a bind mount at a root-owned path), #{INSTEAD}\n", err
    assert t.alive?
    refute File.read("/proc/#{t.pid}/maps").include?('tracer_'), 'something of tracer was loaded'
    assert_empty t.err
  end

  # A root Ruby process started by sh in a mount namespace of its own (sh runs script, then
  # execs the rest: the pid stays the process's).
  def in_namespace(script, env)
    target(TICKING, agent: false, script: '-e', env: BARE.merge(env),
                    prefix: ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', script, 'sh'])
  end

  # A uid no account and no process has: the owner of the tree.
  def throwaway_uid
    taken = Dir['/proc/[0-9]*/status'].filter_map { |f| File.read(f)[/^Uid:\s+(\d+)/, 1]&.to_i rescue nil } # rubocop:disable Style/RescueModifier
    loop do
      uid = 61_000 + rand(3000)
      return uid if !taken.include?(uid) && (Etc.getpwuid(uid) rescue nil).nil? # rubocop:disable Style/RescueModifier
    end
  end

  def chown_tree(dir)
    assert system('chown', '-hR', "#{@uid}:#{@uid}", dir)
  end

  # What a Ruby needs from / to run: its executable's top directory and the usual ones.
  def system_dirs
    mine = File.realpath(RUBY).split('/')[1]
    (%w[usr lib lib32 lib64 libx32 bin sbin etc opt proc dev] + [mine]).uniq.select { |d| File.exist?("/#{d}") }
  end

  # test/apps/swap_on_open.c, built here, started as root (its watch), swapping as the user.
  def start_attacker(watched, a, b)
    bin = File.join(@dir, 'swap_on_open')
    out, status = Open3.capture2e('cc', '-O2', '-Wall', '-o', bin, File.join(ROOT, 'test', 'apps', 'swap_on_open.c'))
    assert status.success?, out
    r, w = IO.pipe
    @attacker = Process.spawn(bin, watched, @uid.to_s, a, b, out: w)
    w.close
    assert_equal "watching\n", r.gets
    r
  end
end

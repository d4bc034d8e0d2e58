# make_install_test.rb: `make install` to a fresh prefix, from a copy of the built checkout that
# is gone before tracer runs: the installed binary alone preloads the agent (-x), attaches to a
# process that loaded the installed agent, and loads it into one that never did; and when a
# part is missing, it says which, and what to do.
require_relative 'helper'

class MakeInstallTest < Minitest::Test
  include TracerTest

  # What make install needs of the checkout, built (cp -p keeps the times: make builds nothing).
  PARTS = %w[Makefile client ext include lib script share].freeze

  # One install for the whole file: the build it copies takes no time, the copy some.
  def self.install
    @install ||= begin
      dir = File.realpath(Dir.mktmpdir('tracer-install'))
      at_exit { FileUtils.rm_rf(dir) }
      src = File.join(dir, 'src')
      FileUtils.mkdir_p(src)
      FileUtils.cp_r(PARTS.map { |p| File.join(ROOT, p) }, src, preserve: true)
      prefix = File.join(dir, 'prefix')
      out, status = Open3.capture2e('make', '-C', src, 'install', "PREFIX=#{prefix}", "RUBY=#{RUBY}")
      FileUtils.rm_rf(src)
      { dir: dir, prefix: prefix, out: out, status: status }
    end
  end

  def setup
    super
    @i = self.class.install
    assert @i[:status].success?, "make install failed:\n#{@i[:out]}"
    @prefix = @i[:prefix]
    @agent = File.join(@prefix, 'lib', 'tracer')
    @dir = Dir.mktmpdir('tracer-installed', @i[:dir])
    # No tracer_agent gem for Ruby to fall back on, whatever this machine has installed.
    @gems = File.join(@dir, 'gems')
    FileUtils.mkdir_p(@gems)
    File.write(File.join(@dir, 'shop.rb'), <<~RUBY)
      $stdout.sync = true
      class Shop
        def tax(x) = x * 2
      end
      3.times { |i| Shop.new.tax(i) }
      puts "agent from \#{$LOADED_FEATURES.grep(/tracer_agent\\.so\\z/).inspect}"
      if ARGV[0] == 'stay'
        puts "ready \#{Process.pid}"
        loop { Shop.new.tax(1); sleep 0.01 }
      end
    RUBY
  end

  # The environment of a user who never heard of TRACER_AGENT_LIB, nor has the gem.
  def env
    { 'TRACER_AGENT_LIB' => nil, 'RUBYLIB' => nil, 'RUBYOPT' => nil, 'GEM_HOME' => @gems, 'GEM_PATH' => @gems }
  end

  def installed(*args, prefix: @prefix, extra: {})
    tracer = File.join(prefix, 'bin', 'tracer')
    out, err, status = Open3.capture3(env.merge(extra), tracer, *args.map(&:to_s), chdir: @dir)
    [out, err, status]
  end

  def shop(lib: nil)
    Target.new('stay', agent: !lib.nil?, lib: lib || AGENT_LIB, script: File.join(@dir, 'shop.rb'), env: env)
           .tap { |t| @targets << t }
  end

  # A copy of the install elsewhere, to take parts away from (the binary finds its agent from
  # where it is, so the copy is an install of its own).
  def broken_prefix
    copy = File.join(@dir, 'prefix')
    FileUtils.cp_r(@prefix, copy, preserve: true)
    copy
  end

  def test_install_says_where_and_puts_every_part_there
    version = IO.popen([RUBY, '-e', 'print RUBY_VERSION'], &:read)
    assert_includes @i[:out], "tracer: installed #{@prefix}/bin/tracer"
    assert_includes @i[:out], "tracer: installed the agent for Ruby #{version} (#{RUBY}) in #{@agent}\n"
    %w[bin/tracer share/man/man1/tracer.1 lib/tracer/tracer_agent.rb lib/tracer/tracer_agent/tracer_agent.so
       lib/tracer/tracer_agent/tracer_inject.so lib/tracer/tracer_agent/wrap.rb
       lib/tracer/tracer_agent/built_for].each do |f|
      assert File.file?(File.join(@prefix, f)), "#{f} not installed:\n#{@i[:out]}"
    end
  end

  def test_exec_preloads_the_installed_agent
    out, err, status = installed('-m', 'Shop#tax', '-x', RUBY, 'shop.rb')
    assert status.success?, err
    assert_equal 3, out.scan(/^Shop#tax <\d+\.\d{9}>$/).size, out
    assert_includes out, "agent from [\"#{@agent}/tracer_agent/tracer_agent.so\"]"
  end

  def test_attaches_to_a_process_that_loaded_the_installed_agent
    t = shop(lib: @agent)
    assert_includes t.out, "agent from [\"#{@agent}/tracer_agent/tracer_agent.so\"]"
    out, err, status = installed('-p', t.pid, '-m', 'Shop#tax', '--duration', '0.3')
    assert status.success?, err
    assert_match(/^Shop#tax <\d+\.\d{9}>$/, out)
    refute_match(/loaded tracer_agent/, err, 'it had the agent already')
  end

  def test_loads_the_installed_agent_into_a_process_that_never_did
    t = shop
    assert_includes t.out, 'agent from []'
    out, err, status = installed('-p', t.pid, '-e', '$LOADED_FEATURES.grep(/tracer_agent\.so\z/)')
    assert status.success?, err
    assert_match(/^\*\*\* loaded tracer_agent into process #{t.pid} /, err)
    assert_equal "=> [\"#{@agent}/tracer_agent/tracer_agent.so\"]\n", out
  end

  # A user's own install, PREFIX=~/.local, by a user who is not root, from a copy of their
  # own; then as that user, -x and loading into their own process that never loaded the agent.
  def test_a_users_install_in_their_home
    needs_root 'to make install as user nobody'
    scope = File.exist?('/proc/sys/kernel/yama/ptrace_scope') ? Integer(File.read('/proc/sys/kernel/yama/ptrace_scope')) : 0
    home = File.join(@dir, 'home')
    src = File.join(home, 'src')
    FileUtils.mkdir_p(src)
    FileUtils.cp_r(PARTS.map { |p| File.join(ROOT, p) }, src, preserve: true)
    FileUtils.cp(File.join(@dir, 'shop.rb'), home)
    FileUtils.chmod(0o755, [@dir, @i[:dir]])
    FileUtils.chown_R('nobody', 'nogroup', home)
    as = [*AS_NOBODY, 'env', "HOME=#{home}"]
    out, status = Open3.capture2e(*as, 'make', '-C', src, 'install', "PREFIX=#{home}/.local", "RUBY=#{RUBY}")
    assert status.success?, out
    version = IO.popen([RUBY, '-e', 'print RUBY_VERSION'], &:read)
    assert_includes out, "tracer: installed the agent for Ruby #{version} (#{RUBY}) in #{home}/.local/lib/tracer\n"
    FileUtils.rm_rf(src)
    tracer = File.join(home, '.local', 'bin', 'tracer')
    out, err, status = Open3.capture3(env, *as, tracer, '-m', 'Shop#tax', '-x', RUBY, 'shop.rb', chdir: home)
    assert status.success?, err
    assert_equal 3, out.scan(/^Shop#tax </).size, out
    assert_includes out, "agent from [\"#{home}/.local/lib/tracer/tracer_agent/tracer_agent.so\"]"
    return unless scope.zero? # Yama lets a user ptrace only their children: -x was the test

    # (Not a Target: its nobody's copy of the checkout has no home of nobody's in it.)
    r, w = IO.pipe
    pid = Process.spawn(env, *AS_NOBODY, RUBY, File.join(home, 'shop.rb'), 'stay', out: w, err: File::NULL)
    w.close
    begin
      Timeout.timeout(WAIT) { r.each_line.find { |l| l.start_with?('ready') } } or flunk 'the process never got ready'
      out, err, status = Open3.capture3(env, *as, tracer, '-p', pid.to_s, '-e', '$LOADED_FEATURES.grep(/tracer_agent\.so\z/)', chdir: home)
      assert status.success?, err
      assert_equal "=> [\"#{home}/.local/lib/tracer/tracer_agent/tracer_agent.so\"]\n", out
    ensure
      Process.kill('KILL', pid)
      Process.wait(pid)
      r.close
    end
  end

  # Each error names what is missing and how to get it; -x's does not blame the RUBYOPT.
  def test_a_missing_part_is_named_with_its_fix
    prefix = broken_prefix
    agent = File.join(prefix, 'lib', 'tracer')
    t = shop
    FileUtils.rm(File.join(agent, 'tracer_agent', 'tracer_inject.so'))
    _, err, status = installed('-p', t.pid, '-m', 'Shop#tax', prefix: prefix)
    assert_equal 1, status.exitstatus, err
    assert_equal "tracer: cannot read the agent's #{agent}/tracer_agent/tracer_inject.so (No such file or directory): " \
                 "build it (make agent in the checkout), or make install; a gem older than this tracer has none, " \
                 "or have the app load the agent itself (require 'tracer_agent')\n", err

    FileUtils.rm(File.join(agent, 'tracer_agent', 'tracer_agent.so'))
    _, err, status = installed('-m', 'Shop#tax', '-x', RUBY, 'shop.rb', prefix: prefix)
    assert_equal 1, status.exitstatus, err
    assert_equal "tracer: cannot read the agent's #{agent}/tracer_agent/tracer_agent.so (No such file or directory): " \
                 "build it (make agent in the checkout), or make install\n", err

    FileUtils.rm_rf(agent)
    out, err, status = installed('-m', 'Shop#tax', '-x', RUBY, 'shop.rb', prefix: prefix)
    assert_equal 1, status.exitstatus, err
    assert_empty out
    assert_match(/cannot load such file -- tracer_agent \(LoadError\)/, err)
    assert_match(/^tracer: process \d+ never connected: tracer found no agent to preload .* make install, or set TRACER_AGENT_LIB to the lib\/ of a built tracer checkout, or gem install tracer_agent\n\z/, err)
    refute_match(/RUBYOPT/, err)
    _, err, status = installed('-p', t.pid, '-m', 'Shop#tax', prefix: prefix)
    assert_equal 1, status.exitstatus, err
    assert_match(/\Atracer: found no agent to load into process #{t.pid}: tracer looks in \$TRACER_AGENT_LIB, then in lib\/ .* make install puts it there/, err)

    _, err, status = installed('-m', 'Shop#tax', '-x', RUBY, 'shop.rb', extra: { 'TRACER_AGENT_LIB' => @dir })
    assert_equal 1, status.exitstatus, err
    assert_equal "tracer: cannot read the agent's #{@dir}/tracer_agent.rb (No such file or directory): set TRACER_AGENT_LIB " \
                 "to the lib/ of a tracer checkout, or to make install's PREFIX/lib/tracer\n", err
    assert t.alive?, t.err
  end
end

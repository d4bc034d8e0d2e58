# gem_test.rb: the gem builds, its install compiles the agent and keeps one copy of it, and an app
# loads it from a Gemfile (through bundler/setup, which Ruby ships; Debian keeps the `bundle`
# command in another package).
require_relative 'helper'

class GemTest < Minitest::Test
  include TracerTest

  def test_gem_from_a_gemfile_in_a_sinatra_app
    Dir.mktmpdir do |dir|
      sh(dir, RUBY, '-S', 'gem', 'build', File.join(ROOT, 'tracer_agent.gemspec'), '--output', File.join(dir, 'tracer_agent.gem'),
         chdir: ROOT)
      # Its one warning: the project has no public address to give as its homepage yet.
      warnings = File.read(File.join(dir, 'sh.log')).lines.grep(/WARNING/).map(&:strip)
      assert_empty warnings.grep_v(/no homepage specified|See https:\S+ for help/), 'gem build warns'
      gem = File.join(dir, 'tracer_agent.gem')
      gems = File.join(dir, 'gems')
      # Installing compiles the agent from the gem's own sources, and leaves one library, and
      # the loader tracer -p needs for a process that never required the agent.
      sh(dir, RUBY, '-S', 'gem', 'install', '--local', '--no-document', '--install-dir', gems, gem)
      libs = Dir[File.join(gems, '**', '*.so')].sort
      lib = File.join(gems, 'gems', "tracer_agent-#{gem_version(gem)}", 'lib')
      assert_equal %w[tracer_agent.so tracer_inject.so].map { |f| File.join(lib, 'tracer_agent', f) }, libs
      assert_empty Dir[File.join(gems, '**', '*.o')], 'objects left behind'
      File.write(File.join(dir, 'Gemfile'), "source 'https://rubygems.org'\ngem 'tracer_agent'\ngem 'sinatra', require: 'sinatra/base'\n")
      File.write(File.join(dir, 'app.rb'), <<~RUBY)
        require 'bundler/setup'
        Bundler.require
        $stdout.sync = true
        puts "ready \#{Process.pid}"
        sleep
      RUBY
      env = { 'GEM_HOME' => gems, 'GEM_PATH' => "#{gems}:#{Gem.path.join(':')}", 'BUNDLE_GEMFILE' => File.join(dir, 'Gemfile'),
              'RUBYLIB' => nil, 'RUBYOPT' => nil }
      t = target('gemapp', env: env, agent: false, script: File.join(dir, 'app.rb'))
      out, err, status = tracer('-p', t.pid, '-e', '[TracerAgent::VERSION, $LOADED_FEATURES.grep(/tracer_agent\.so/), defined?(Sinatra::Base)]')
      assert status.success?, err
      assert_match(/\A=> \["\d+\.\d+\.\d+", \["#{Regexp.escape(gems)}[^"]*tracer_agent\.so"\], "constant"\]/, out)

      # The gem's agent, loaded into a process that never required it.
      plain = target('sleep', env: env, agent: false)
      out, err, status = tracer('-p', plain.pid, '-e', '$LOADED_FEATURES.grep(/tracer_agent\.so/)', env: { 'TRACER_AGENT_LIB' => lib })
      assert status.success?, err
      assert_match(/^\*\*\* loaded tracer_agent into process #{plain.pid} /, err)
      assert_equal "=> [\"#{File.join(lib, 'tracer_agent', 'tracer_agent.so')}\"]\n", out
    end
  end

  private

  def gem_version(gem) = IO.popen([RUBY, '-rrubygems/package', '-e', 'print Gem::Package.new(ARGV[0]).spec.version', gem], &:read)

  def sh(dir, *cmd, chdir: dir, out: File.join(dir, 'sh.log'))
    ok = system(*cmd, chdir: chdir, out: out, err: [:child, :out])
    assert ok, "#{cmd.grep(String).join(' ')} failed:\n#{File.read(out)}"
  end
end

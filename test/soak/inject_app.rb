# inject_app.rb DIR: the app test/soak/inject.rb loads the agent into. Four threads and the main
# one do a fixed amount of work that is hard on what the load goes through (allocation, GC and
# compaction, Mutexes and condition variables, fork, require and load in other threads), then
# it waits for its standard input to close, and prints what it computed: the same every run,
# traced or not. DIR holds the files it requires (made here, one per require).
$stdout.sync = true
dir = ARGV.fetch(0)
ROUNDS = Integer(ENV.fetch('SOAK_ROUNDS', '40'))
puts 'ready'

# Allocation: strings, arrays and hashes, kept and dropped, and a checksum of them.
allocator = Thread.new do
  sum = 0
  ROUNDS.times do |r|
    kept = Array.new(2_000) { |i| "s#{r}-#{i}" * (i % 7 + 1) }
    h = kept.each_with_index.to_h { |s, i| [s, i] }
    sum += kept.sum(&:size) + h.size
  end
  sum
end

# Mutexes: two threads hand a counter back and forth under a lock and a condition variable.
lock = Mutex.new
turn = ConditionVariable.new
count = 0
players = 2.times.map do |me|
  Thread.new do
    (ROUNDS * 25).times do
      lock.synchronize do
        turn.wait(lock) while count % 2 != me
        count += 1
        turn.signal
      end
    end
  end
end

# GC: full collections, and compaction where the Ruby has it.
collector = Thread.new do
  (ROUNDS / 4).times do |r|
    GC.start
    GC.compact if r.even? && GC.respond_to?(:compact)
    sleep 0.001
  end
  :collected
end

# require and load in a thread: a file per round, each defining a method.
requirer = Thread.new do
  ROUNDS.times do |r|
    path = File.join(dir, "soak_#{r}.rb")
    File.write(path, "module SoakLoaded; def self.m#{r} = #{r} * 3; end\n")
    require path
    load path
  end
  (0...ROUNDS).sum { |r| SoakLoaded.public_send("m#{r}") }
end

# fork: children compute and answer through a pipe.
forked = (ROUNDS / 8).times.map do |r|
  rd, wr = IO.pipe
  pid = fork do
    rd.close
    wr.write((1..(r + 10)).reduce(:*).to_s.size.to_s)
    exit!(0)
  end
  wr.close
  answer = rd.read
  rd.close
  Process.wait(pid)
  Integer(answer)
end

result = {
  allocated: allocator.value,
  handed: (players.each(&:join) && count),
  collected: collector.value,
  required: requirer.value,
  forked: forked.sum,
  features: $LOADED_FEATURES.count { |f| f.start_with?(dir) }
}
$stdin.read # until the soak is done with this process
puts result.inspect

# boxes.rb: a process whose app is in two Ruby::Boxes (Ruby 4.0 with RUBY_BOX=1; before 4.0,
# or without it, the main program alone): Worker in the main box, and in a box of its own,
# what boxed.rb defines there (Boxed, and String#shout on the builtin String). Prints "ready
# PID", then calls into both every 5 ms, forever.
$stdout.sync = STDOUT.sync = true # both: in a Ruby::Box (4.0) Kernel#puts writes to STDOUT, not $stdout

class Worker
  def work(x) = x * 2
end

box = defined?(Ruby::Box) && Ruby::Box.enabled? ? Ruby::Box.new : nil
box&.require(File.join(__dir__, 'boxed.rb'))
puts "ready #{Process.pid} #{box ? "in #{Ruby::Box.current.inspect}, and #{box.inspect}" : 'without Ruby::Box'}"
w = Worker.new
loop do
  w.work(1)
  if box
    box::Boxed.new.work(2)
    box.eval('"x".shout')
  end
  sleep 0.005
end

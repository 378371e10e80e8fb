package loopdev

// oldLoopInfo is x86_64's struct loop_info: __kernel_old_dev_t is
// unsigned long.
var oldLoopInfo = loopInfoLayout{size: 168, device: 8, inode: 16, rdevice: 24, devSize: 8, offset: 32, flags: 44, name: 48}
